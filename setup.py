"""setuptools entry point: builds the cffi extension (csrc/), optionally, and puts
the bundled examples in the package (vmrt/examples in a wheel: `vmrt example`).

Everything vmrt._cnative does has a pure-Python twin except native llvm-cpu
executables and C native modules, so a machine without a C compiler still gets a
working vmrt: the failed build prints one warning line and the package installs
without the extension (and vmrt says so when it first runs something, since pip
hides a build's output). VMRT_REQUIRE_NATIVE=1 makes the failure fatal instead, for
builds that must ship the extension (`make wheel`, release wheels); VMRT_NO_NATIVE=1
builds no extension at all (`make wheel-pure`: the py3-none-any wheel).
"""

import os
import sys
import sysconfig
import uuid

from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, ExecError, PlatformError

WARNING = ("vmrt: building the C extension failed ({}); installing the pure-Python "
           "package: native llvm-cpu executables and C native modules are unavailable "
           "(to get them, install a C compiler and reinstall vmrt with pip --no-cache-dir)")
# --no-cache-dir: pip keeps the wheel it built from an sdist (or from a directory
# whose path has a hyphen) and would reinstall this C-less one.


def switched_on(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


class optional_build_ext(build_ext):
    # cffi wraps this class (it generates the C source, then calls our run()).
    def run(self):
        if switched_on("VMRT_NO_NATIVE"):  # a pure-Python package, by request
            self.extensions = []
            return
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            if switched_on("VMRT_REQUIRE_NATIVE"):
                raise
            # No outputs: install and editable builds then skip the missing .so.
            self.extensions = []
            # pip shows this only with -v; vmrt.memory says the same at run time.
            print(WARNING.format(f"{type(error).__name__}: {error}"), file=sys.stderr,
                  flush=True)


class build_py_with_examples_and_id(build_py):
    """The package plus, in a build that is not editable:
    - examples/ (models, their MLIR, the scripts that run them) as vmrt/examples, so a
      wheel carries what the README's quick start runs (an editable install has none:
      `vmrt example` finds the checkout's examples/);
    - vmrt/_build_id.py, the id of this build, which keys vmrt's on-disk caches
      (vmrt.vm.code_cache.build_id; an editable install's sources may change, so vmrt
      hashes them instead)."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        path = os.path.join(self.build_lib, "vmrt", "_build_id.py")
        with open(path, "w", encoding="ascii") as out:
            out.write(f'"""Written by setup.py at build time."""\n\n'
                      f'BUILD_ID = "{uuid.uuid4().hex}"\n')
        source = Path(__file__).resolve().parent / "examples"
        if not source.is_dir():
            return
        target = Path(self.build_lib, "vmrt", "examples")
        self.mkpath(str(target))
        for path in sorted(source.iterdir()):
            if path.is_file() and path.suffix != ".pyc":
                self.copy_file(str(path), str(target / path.name))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + (
            [] if self.editable_mode else [os.path.join(self.build_lib, "vmrt", "_build_id.py")])


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
    cmdclass={"build_ext": optional_build_ext, "build_py": build_py_with_examples_and_id,
              "bdist_wheel": tagged_bdist_wheel},
    options=options,
)
