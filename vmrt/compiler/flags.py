"""iree-compile flags chosen for a target: the device, the host's CPU, and the flag sets
worth trying there (optimisation level, microkernels, data tiling).

Measured on torchvision ResNet-18 (issue 36: 60 ms a call with the defaults, 14 ms
with FAST), data tiling of convolutions is what pays on CNNs; on MobileNetV3-small
and a BERT encoder the sets differ little, which is why `tune` measures them rather
than this file guessing per model.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
from dataclasses import dataclass
from typing import Optional

from vmrt.errors import StatusCode, VmrtError

__all__ = ["Candidate", "TARGETS", "candidates", "compiler_identity", "host_cpu_features",
           "target_flags"]

TARGETS = ("host", "generic", "vmvx")
_LLVM_CPU = ["--iree-hal-target-device=local",
             "--iree-hal-local-target-device-backends=llvm-cpu"]


@dataclass(frozen=True)
class Candidate:
    """A named flag set on top of the target's flags; the default (no flags) is the
    reference every other build is checked against."""

    name: str
    flags: tuple[str, ...] = ()
    #: What to build instead when this set fails to compile (without tuning).
    fallback: Optional["Candidate"] = None

    @property
    def is_default(self) -> bool:
        return not self.flags


DEFAULT = Candidate("default")
UKERNELS = Candidate("ukernels", ("--iree-llvmcpu-enable-ukernels=all",))
#: Data tiling of matmuls and convolutions at the default optimisation level: where
#: O3 fails to compile (a 4-layer BERT's LayerNorm overflows the compiler's 32 KiB
#: stack limit at O3: 'exceeded stack allocation limit of 32768 bytes ... Got 49344').
DATA_TILING_CONV = Candidate("data-tiling-conv", UKERNELS.flags + (
    "--iree-opt-data-tiling",
    "--iree-dispatch-creation-experimental-set-data-tiling-ops=matmul",
    "--iree-dispatch-creation-experimental-set-data-tiling-ops=convolution"), UKERNELS)
O3_UKERNELS = Candidate("o3-ukernels", ("--iree-opt-level=O3",
                                        "--iree-llvmcpu-enable-ukernels=all"))
DATA_TILING = Candidate("o3-data-tiling", O3_UKERNELS.flags + (
    "--iree-opt-data-tiling",
    "--iree-dispatch-creation-experimental-set-data-tiling-ops=matmul"))
#: What vmrt.compile builds for the host without tuning (the issue's known-good set);
#: where it fails to compile, its fallbacks are tried in turn.
FAST = Candidate("o3-data-tiling-conv", DATA_TILING.flags + (
    "--iree-dispatch-creation-experimental-set-data-tiling-ops=convolution",),
    DATA_TILING_CONV)


def target_flags(target: str) -> list[str]:
    """The flags naming the device and CPU: `host` (this CPU's features), `generic`
    (any CPU of this architecture) or `vmvx` (portable bytecode kernels)."""
    if target == "host":
        return _LLVM_CPU + ["--iree-llvmcpu-target-cpu=host"]
    if target == "generic":
        return _LLVM_CPU + ["--iree-llvmcpu-target-cpu=generic"]
    if target == "vmvx":
        return ["--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=vmvx"]
    raise VmrtError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})",
                    StatusCode.INVALID_ARGUMENT)


def candidates(target: str, tune: bool, extra: tuple[str, ...] = ()) -> list[Candidate]:
    """The builds to make: the default first (the reference), then what may beat it.
    Without tuning, FAST (or only the default off the host's CPU: vmvx has no such
    flags); with it, every set. `extra` flags (the caller's) make one more set."""
    found = [DEFAULT]
    if target != "vmvx":
        found += [O3_UKERNELS, DATA_TILING, FAST, DATA_TILING_CONV] if tune else [FAST]
    if extra:
        found.append(Candidate("given", tuple(extra)))
    return found


@functools.lru_cache(maxsize=None)
def host_cpu_features() -> str:
    """What the host's CPU is (its model and feature flags), as code built for
    `--iree-llvmcpu-target-cpu=host` depends on it: part of the compile cache key."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            lines = file.read().split("\n\n")[0].splitlines()
    except OSError:
        lines = []
    wanted = ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")
    found = [line for line in lines if line.split(":")[0].strip() in wanted]
    return "\n".join([platform.machine(), *found])


@functools.lru_cache(maxsize=None)
def compiler_identity() -> str | None:
    """The installed compiler's version (iree/compiler/version.py's text, read without
    importing the compiler, which takes a few hundred milliseconds), or None."""
    try:
        spec = importlib.util.find_spec("iree.compiler")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "version.py"),
                  encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None
