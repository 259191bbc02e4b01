"""vmrt disasm against iree-dump-module --output=disassembly (3.13.0), byte for byte."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asm_helpers import iree_dump, require_tools
from bytecode_gen import random_module
from vmrt.asm import disassemble
from vmrt.format import write_module
from vmrt.isa import INSTRUCTIONS

#: Corpus modules where vmrt disasm deliberately differs from iree-dump-module:
#: iree-dump-module stops at vm.cast.ui64.f32 ("unhandled ext opcode"), and
#: prints two functions named @__init (an export and another function's debug
#: name), which no assembler can read back; vmrt keeps the export's lines as
#: upstream prints them and names the other function @fnN.
CORPUS_DEVIATIONS = {
    "float32_ops": "iree-dump-module cannot print vm.cast.ui64.f32",
    "params": "duplicate @__init", "params_gather": "duplicate @__init",
    "tensor_async": "duplicate @__init",
    "tensor_elementwise": "duplicate @__init",
    "tensor_linalg": "duplicate @__init", "tensor_results": "duplicate @__init",
}
#: Instructions iree-dump-module 3.13.0 cannot print (see above; it mis-decodes
#: vm.switch.ref, skipping its type operand).
UNPRINTABLE_UPSTREAM = {"SwitchRef", "CastUI64F32"}


def test_upstream_conformance_modules_print_identically(upstream_vmfb):
    require_tools("iree-dump-module")
    for name, path in sorted(upstream_vmfb.items()):
        reference = iree_dump(path)
        assert reference.returncode == 0, reference.stderr
        assert disassemble(path) == reference.stdout, name


def test_upstream_sources_are_fixed_points(upstream_vmasm, upstream_vmfb):
    # Upstream's conformance sources are themselves iree-dump-module output.
    for name, source in upstream_vmasm.items():
        assert disassemble(upstream_vmfb[name]) == source.read_text(), name


def test_corpus_modules_print_identically(corpus):
    require_tools("iree-dump-module")
    same = []
    for module in corpus:
        reference = iree_dump(module.vmfb)
        mine = disassemble(module.vmfb)
        if module.name in CORPUS_DEVIATIONS:
            assert mine != reference.stdout or reference.returncode, module.name
            continue
        assert reference.returncode == 0, (module.name, reference.stderr)
        assert mine == reference.stdout, module.name
        same.append(module.name)
    assert len(same) == len(corpus) - len(CORPUS_DEVIATIONS)


def test_corpus_deviations_are_only_the_documented_ones(corpus):
    require_tools("iree-dump-module")
    by_name = {m.name: m for m in corpus}
    # float32_ops: identical up to where iree-dump-module gives up.
    module = by_name["float32_ops"]
    reference = iree_dump(module.vmfb)
    assert reference.returncode != 0 and "unhandled ext opcode" in reference.stderr
    assert disassemble(module.vmfb).startswith(reference.stdout)
    assert "vm.cast.ui64.f32" in disassemble(module.vmfb)
    # Duplicate names: the vm.export lines are upstream's; only the other function's
    # header and the call to it (by ordinal: its name is the export's) differ.
    for name in sorted(n for n, why in CORPUS_DEVIATIONS.items() if why == "duplicate @__init"):
        reference = iree_dump(by_name[name].vmfb).stdout.splitlines()
        mine = disassemble(by_name[name].vmfb).splitlines()
        diff = [(a, b) for a, b in zip(mine, reference) if a != b]
        assert len(mine) == len(reference)
        assert len(diff) == 2, diff
        assert diff[0][0].startswith("vm.func @fn") and diff[0][1].startswith("vm.func @__init(")
        assert "vm.call @module:" in diff[1][0] and "vm.call @module.__init(" in diff[1][1]
        assert "vm.export @__init\nvm.func @__init() -> () {" in "\n".join(mine)


@pytest.mark.parametrize("seed", range(6))
def test_random_bytecode_of_every_instruction_prints_identically(seed, tmp_path):
    require_tools("iree-dump-module")
    printable = [i for i in INSTRUCTIONS
                 if i.kind == "op" and i.symbol not in UNPRINTABLE_UPSTREAM]
    path = tmp_path / "gen.vmfb"
    path.write_bytes(write_module(random_module(seed, printable, result_moves=True)))
    reference = iree_dump(path)
    assert reference.returncode == 0, reference.stderr
    assert disassemble(path) == reference.stdout


@pytest.mark.parametrize("flags,kwargs", [
    (["--bytecode_offsets"], {"bytecode_offsets": True}),
    (["--function=calls"], {"function": "calls"}),
    (["--function=7"], {"function": "7"}),
    (["--function=fn3"], {"function": "fn3"}),
    (["--function=no_such_function"], {"function": "no_such_function"}),
])
def test_options_match_iree_dump_module(tmp_path, flags, kwargs):
    require_tools("iree-dump-module")
    path = tmp_path / "gen.vmfb"
    printable = [i for i in INSTRUCTIONS
                 if i.kind == "op" and i.symbol not in UNPRINTABLE_UPSTREAM]
    path.write_bytes(write_module(random_module(99, printable)))
    reference = iree_dump(path, *flags)
    assert reference.returncode == 0
    assert disassemble(path, **kwargs) == reference.stdout


def test_cli(corpus, tmp_path):
    module = next(m for m in corpus if m.name == "calls")
    run = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "disasm", str(module.vmfb),
                          "--function=call_mixed", "--bytecode_offsets"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == disassemble(module.vmfb, function="call_mixed", bytecode_offsets=True)
    assert "[00000000]^bb0:\n[00000001]  %i6, %i8 = vm.call @calls:1(" in run.stdout
    bad = tmp_path / "bad.vmfb"
    bad.write_bytes(b"not a module")
    run = subprocess.run([sys.executable, "-m", "vmrt.tools.cli", "disasm", str(bad)],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.startswith("vmrt: error: ") and "Traceback" not in run.stderr
