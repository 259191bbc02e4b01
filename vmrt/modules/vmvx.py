"""The `vmvx` native module (the microkernels VMVX executables import). It is
defined in vmrt.hal.vmvx_module, beside the VMVX loader that needs it; this is
its name among the native modules vmrt supplies."""

from vmrt.hal.vmvx_module import VmvxModule

__all__ = ["VmvxModule"]
