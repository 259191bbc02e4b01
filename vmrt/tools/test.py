"""Run a module's test exports: `test_*` must succeed and `fail_*` must fail.

    vmrt test MODULE [--module=DEP ...] [--verbose]

Each export runs in a fresh context (dependencies first, then MODULE). Modules
importing `yieldable_test` get vmrt's Python twin of upstream's test module.
Prints one line per failure and a closing `N passed, M failed`; exit code 1 on
any failure.
"""

from __future__ import annotations

import sys

from vmrt.errors import VmrtError
from vmrt.vm.context import Context, Instance
from vmrt.modules.natives import native_modules_for
from vmrt.vm.module import load_module


def add_arguments(parser) -> None:
    parser.add_argument("module", help="the .vmfb whose test_*/fail_* exports run")
    parser.add_argument("--module", dest="deps", action="append", default=[],
                        metavar="DEP", help="a module to register first (repeatable)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print passing tests too")


def run(args) -> int:
    module = load_module(args.module)
    deps = [load_module(path) for path in args.deps]
    names = [n for n in module.export_names() if n.startswith(("test_", "fail_"))]
    instance = Instance()
    passed = failed = 0
    for name in names:
        expect_failure = name.startswith("fail_")
        try:
            # Fresh native modules per test too: each test starts from clean state.
            natives = native_modules_for(deps + [module], args.deps + [args.module])
            with Context(instance, natives + deps + [module]) as context:
                context.function(module.name, name)()
            error = None
        except VmrtError as caught:
            error = caught
        except RecursionError:  # the VM stack guard should catch this first
            error = VmrtError("Python recursion limit reached")
        if expect_failure and error is None:
            failed += 1
            print(f"FAIL {name}: expected a failure, but it succeeded")
        elif not expect_failure and error is not None:
            failed += 1
            print(f"FAIL {name}: {error.one_line()}")
        else:
            passed += 1
            if args.verbose:
                print(f"ok   {name}" + (f" ({error.code.name})" if error else ""))
    print(f"{passed} passed, {failed} failed")
    sys.stdout.flush()
    return 1 if failed else 0
