"""setuptools entry point: only here to build the cffi extension (csrc/), optionally.

Everything vmrt._cnative does has a pure-Python twin except native llvm-cpu
executables and C native modules, so a machine without a C compiler still gets a
working vmrt: the failed build prints one warning line and the package installs
without the extension. VMRT_REQUIRE_NATIVE=1 makes the failure fatal instead, for
builds that must ship the extension (`make wheel`, release wheels).
"""

import os
import sys
import sysconfig

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

WARNING = ("vmrt: building the C extension failed ({}); installing the pure-Python "
           "package: native llvm-cpu executables and C native modules are unavailable "
           "(to get them, install a C compiler and reinstall vmrt with pip --no-cache-dir)")
# --no-cache-dir: pip keeps the wheel it built from an sdist (or from a directory
# whose path has a hyphen) and would reinstall this C-less one.


class optional_build_ext(build_ext):
    # cffi wraps this class (it generates the C source, then calls our run()).
    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            if os.environ.get("VMRT_REQUIRE_NATIVE", "") not in ("", "0"):
                raise
            # No outputs: install and editable builds then skip the missing .so.
            self.extensions = []
            # pip shows this with -v; without it, vmrt says the same at run time
            # when a module needs the C code (vmrt.memory.c_extension()).
            print(WARNING.format(f"{type(error).__name__}: {error}"), file=sys.stderr,
                  flush=True)


class tagged_bdist_wheel(bdist_wheel):
    """A wheel whose C build failed holds only Python: it is tagged py3-none-any (and
    pure), as such a wheel is, not with the platform tag of an extension it lacks."""

    def get_tag(self):
        if not self.get_finalized_command("build_ext").extensions:  # (optional_build_ext)
            self.root_is_pure = True
            return "py3", "none", "any"
        return super().get_tag()


# The extension uses only the stable ABI (cffi defines Py_LIMITED_API, and
# vmrt_caller.c asks for 3.8's), so one wheel serves every CPython >= 3.10:
# tag it cp310-abi3. Free-threaded CPython has no stable ABI (cffi then builds a
# version-specific .so), so it keeps the default tag. The platform tag is the
# build's (linux_x86_64); `make wheel` has auditwheel make it a manylinux one.
options = {}
if not sysconfig.get_config_var("Py_GIL_DISABLED"):
    options["bdist_wheel"] = {"py_limited_api": "cp310"}

setup(
    cffi_modules=["csrc/build_native.py:ffibuilder"],
    cmdclass={"build_ext": optional_build_ext, "bdist_wheel": tagged_bdist_wheel},
    options=options,
)
