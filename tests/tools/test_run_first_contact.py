"""`vmrt run` as a new user meets it (issue 39), through the CLI in a subprocess:
errors that say what to do (the signature of a call given the wrong arguments,
"did you mean" for a misspelt function, the exports to choose from)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import vmrt

REPO = Path(__file__).resolve().parents[2]
SCALAR = REPO / "examples" / "scalar.vmfb"
MLP = REPO / "examples" / "mlp.vmfb"


def vmrt_run(*argv):
    """`python -m vmrt run ARGV`: (exit code, stdout, stderr)."""
    result = subprocess.run([sys.executable, "-m", "vmrt", "run", *map(str, argv)],
                            capture_output=True, text=True, cwd=REPO)
    return result.returncode, result.stdout, result.stderr


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmrt: error: "), err
    return lines[0]


# -- item 4 ---------------------------------------------------------------------------------------
def test_a_wrong_argument_count_shows_the_signature():
    code, out, err = vmrt_run(f"--module={MLP}")
    assert (code, out) == (1, "EXEC @predict\n")
    assert one_error_line(err).endswith(
        "expected 1 arguments but passed 0; invoking function 'predict'; "
        "`sync func @predict(%input0: tensor<1x4xf32>) -> (%output0: tensor<1x3xf32>)`")


def test_a_misspelt_function_gets_a_suggestion():
    code, _, err = vmrt_run(f"--module={SCALAR}", "--function=gdc", "--input=1")
    assert code == 1
    assert "no function `gdc` exported by module 'module' (did you mean `gcd`?)" in \
        one_error_line(err)


def test_an_unknown_function_lists_the_exports():
    code, _, err = vmrt_run(f"--module={SCALAR}", "--function=xyzzy")
    assert code == 1
    assert "(it exports gcd, collatz, newton_sqrt, demo)" in one_error_line(err)


def test_several_exports_and_no_function_lists_them():
    code, _, err = vmrt_run(f"--module={SCALAR}")
    assert code == 1
    assert "more than one exported function present (gcd, collatz, newton_sqrt, demo); " \
           "--function= must be specified explicitly" in one_error_line(err)


def test_a_python_call_with_the_wrong_count_shows_the_declaration():
    with vmrt.load(SCALAR) as m, pytest.raises(vmrt.VMError) as error:
        m.gcd(1)
    assert str(error.value) == ("INVALID_ARGUMENT: expected 2 arguments, got 1; calling "
                                "`sync func @gcd(%input0: i32, %input1: i32) -> "
                                "(%output0: i32)`")


# -- item 5 ---------------------------------------------------------------------------------------
TRACED_VMASM = REPO / "tests" / "vm" / "vmasm" / "traced.vmasm"


def test_run_takes_vmasm_as_vmrt_load_does():
    assert vmrt_run(f"--module={TRACED_VMASM}", "--function=sum", "--input=3") == (
        0, "EXEC @sum\nresult[0]: i32=36\n", "")
    with vmrt.load(TRACED_VMASM) as m:
        assert m.sum(3) == 36


def test_vmasm_from_stdin():
    result = subprocess.run([sys.executable, "-m", "vmrt", "run", "--module=-", "--function=sum",
                             "--input=3"], input=TRACED_VMASM.read_text(), capture_output=True,
                            text=True, cwd=REPO)
    assert (result.returncode, result.stdout) == (0, "EXEC @sum\nresult[0]: i32=36\n")


def test_mlir_is_compiled_and_run(tmp_path, monkeypatch):
    pytest.importorskip("iree.compiler")
    monkeypatch.setenv("VMRT_CACHE_DIR", str(tmp_path / "cache"))
    mlir = REPO / "examples" / "mlp.mlir"
    compiled = vmrt_run(f"--module={mlir}", "--input=1x4xf32=1 0.5 -0.5 2")
    assert compiled == vmrt_run(f"--module={MLP}", "--input=1x4xf32=1 0.5 -0.5 2")
    assert compiled[0] == 0 and compiled[1].startswith("EXEC @predict\n")


def test_mlir_text_under_another_name_says_compile_it_first(tmp_path):
    text = tmp_path / "model.txt"
    text.write_bytes((REPO / "examples" / "mlp.mlir").read_bytes())
    code, _, err = vmrt_run(f"--module={text}")
    line = one_error_line(err)
    assert code == 1 and "FlatBuffer" not in line
    assert f"{text} is text, not a compiled module: compile MLIR first (`vmrt compile " in line
    for source in (text, text.read_bytes()):
        with pytest.raises(vmrt.VmrtError, match="compile MLIR first") as error:
            vmrt.load(source)
        assert error.value.code == vmrt.StatusCode.INVALID_ARGUMENT


# -- item 11 --------------------------------------------------------------------------------------
def test_help_lists_device_among_the_flags_that_work():
    code, out, _ = vmrt_run("--help")
    assert code == 0
    working, _, rest = out.partition("accepted for iree-run-module compatibility")
    no_effect = rest.split("\n\n")[0]  # (the group, not the epilog below it)
    assert "--device URI" in working and "local-task" in working
    assert "--module_mode" in no_effect
    assert "--device" not in no_effect and "--print_statistics" not in no_effect


def test_print_statistics_reports_each_device():
    code, out, err = vmrt_run(f"--module={MLP}", "--input=1x4xf32=1 0.5 -0.5 2",
                              "--device=local-task", "--print_statistics")
    assert code == 0 and out.endswith("1x3xf32=[0.170226 0.071629 0.758145]\n")
    lines = err.splitlines()
    assert lines[:2] == ["Device: local-task", "[[ vmrt allocator statistics ]]"]
    assert lines[2].startswith("  allocated: ") and " in 3 buffers" in lines[2]
    # a program without the hal module has no device to report (as iree-run-module)
    assert vmrt_run(f"--module={SCALAR}", "--function=gcd", "--input=4", "--input=6",
                    "--print_statistics") == (0, "EXEC @gcd\nresult[0]: i32=2\n", "")


# -- item 15 --------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, meant", [
    (["run", f"--module={SCALAR}", "--functon=gcd"], "--function"),
    (["run", f"--module={SCALAR}", "--function=gcd", "--inputs=3"], "--input"),
    (["dump", "--outpt=all", str(SCALAR)], "--output"),
])
def test_a_mistyped_flag_gets_a_suggestion(argv, meant):
    result = subprocess.run([sys.executable, "-m", "vmrt", *argv], capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 1
    assert one_error_line(result.stderr).endswith(f" (did you mean {meant}?)")


def test_an_unlike_flag_gets_no_suggestion():
    code, _, err = vmrt_run(f"--module={SCALAR}", "--zzzzzz=1")
    assert code == 1 and one_error_line(err) == "vmrt: error: unrecognized arguments: --zzzzzz=1"


@pytest.mark.parametrize("limits", [dict(fuel=-1), dict(max_memory="8"), dict(timeout=-1.0),
                                    dict(max_depth=10 ** 6)])
def test_a_bad_limit_is_a_value_error_and_a_vm_error(limits):
    with pytest.raises(ValueError) as error:
        vmrt.Limits(**limits)
    assert isinstance(error.value, vmrt.VMError) and isinstance(error.value, vmrt.InvalidLimit)
    assert error.value.code == vmrt.StatusCode.INVALID_ARGUMENT


def test_set_fuel_sets_and_refuel_adds():
    with vmrt.load(SCALAR, limits=vmrt.Limits(fuel=1000)) as m:
        assert m.gcd(1071, 462) == 21
        spent = 1000 - m.context.fuel_remaining
        m.context.set_fuel(500)
        assert m.context.fuel_remaining == 500
        m.context.refuel(20)
        assert m.context.fuel_remaining == 520
        m.gcd(1071, 462)
        assert m.context.fuel_remaining == 520 - spent
        m.context.set_fuel(0)
        with pytest.raises(vmrt.FuelExhausted):
            m.gcd(1071, 462)
        with pytest.raises(ValueError):
            m.context.set_fuel(-5)


# -- item 10 --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def foreign_targets(tmp_path_factory):
    """examples/mlp.mlir compiled for Vulkan and for aarch64 llvm-cpu."""
    import shutil
    if shutil.which("iree-compile") is None:
        pytest.skip("needs iree-compile")
    folder = tmp_path_factory.mktemp("targets")
    flags = {"vulkan": ["--iree-hal-target-device=vulkan"],
             "aarch64": ["--iree-hal-target-device=local",
                         "--iree-hal-local-target-device-backends=llvm-cpu",
                         "--iree-llvmcpu-target-triple=aarch64-linux-gnu"]}
    for name, target in flags.items():
        subprocess.run(["iree-compile", *target, str(REPO / "examples" / "mlp.mlir"), "-o",
                        str(folder / f"{name}.vmfb")], check=True, capture_output=True)
    return folder


@pytest.mark.parametrize("name, compiled", [
    ("vulkan", "a `vulkan` device with vulkan-spirv (vulkan-spirv-fb) executables"),
    ("aarch64", "a `local` device with llvm-cpu (embedded-elf-arm_64) executables"),
])
def test_a_module_for_another_target_says_what_and_how(foreign_targets, name, compiled):
    code, _, err = vmrt_run(f"--module={foreign_targets / name}.vmfb",
                            "--input=1x4xf32=1 0.5 -0.5 2")
    line = one_error_line(err)
    assert code == 1 and "#hal.device.target<" not in line and len(line) < 500
    assert f"the module was compiled for {compiled}; vmrt runs local-sync" in line
    assert "--iree-hal-local-target-device-backends=vmvx" in line
    with pytest.raises(vmrt.VmrtError, match=re.escape(f"compiled for {compiled}")):
        vmrt.load(foreign_targets / f"{name}.vmfb")


def test_missing_parameters_say_which_flag_gives_them(parameter_model):
    vmfb, _, _ = parameter_model
    code, _, err = vmrt_run(f"--module={vmfb}", "--input=4xf32=1")
    assert code == 1
    assert "the module needs parameters of scope 'model'; give an archive (.irpa, " \
           ".safetensors, .gguf) with `--parameters=model=FILE` (vmrt run)" in one_error_line(err)
    with pytest.raises(vmrt.VmrtError, match=r"`parameters=\{'model': FILE\}` \(vmrt.load\)"):
        vmrt.load(vmfb)
