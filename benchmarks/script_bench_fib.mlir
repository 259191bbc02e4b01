// Recursive Fibonacci for benchmarks/script_bench.py, in the vm dialect:
// iree-compile 3.13.0 did not finish a recursive func.func within minutes (the
// scf.if and cf.cond_br forms alike, --iree-opt-level=O0 too), so this is the
// function as its VM lowering would be, compiled with --compile-from=vm.
vm.module @module {
  vm.func @fib(%n: i64) -> i64 {
    %c1 = vm.const.i64 1
    %c2 = vm.const.i64 2
    %small = vm.cmp.lt.i64.s %n, %c2 : i64
    vm.cond_br %small, ^base, ^rec
  ^base:
    vm.return %n : i64
  ^rec:
    %a = vm.sub.i64 %n, %c1 : i64
    %b = vm.sub.i64 %n, %c2 : i64
    %fa = vm.call @fib(%a) : (i64) -> i64
    %fb = vm.call @fib(%b) : (i64) -> i64
    %s = vm.add.i64 %fa, %fb : i64
    vm.return %s : i64
  }
  vm.export @fib
}
