// The loops of benchmarks/script_bench.py written in MLIR, as a host would write
// them for iree-compile (see that file for the build command; fib is in
// script_bench_fib.mlir).

// 64-bit xorshift steps summed (wrapping), n rounds.
func.func @xorshift(%seed: i64, %n: i64) -> i64 {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c13 = arith.constant 13 : i64
  %c7 = arith.constant 7 : i64
  %c17 = arith.constant 17 : i64
  %r:3 = scf.while (%i = %c0, %x = %seed, %total = %c0) : (i64, i64, i64) -> (i64, i64, i64) {
    %more = arith.cmpi slt, %i, %n : i64
    scf.condition(%more) %i, %x, %total : i64, i64, i64
  } do {
  ^bb0(%i: i64, %x: i64, %total: i64):
    %a = arith.shli %x, %c13 : i64
    %x1 = arith.xori %x, %a : i64
    %b = arith.shrsi %x1, %c7 : i64
    %x2 = arith.xori %x1, %b : i64
    %c = arith.shli %x2, %c17 : i64
    %x3 = arith.xori %x2, %c : i64
    %t = arith.addi %total, %x3 : i64
    %next = arith.addi %i, %c1 : i64
    scf.yield %next, %x3, %t : i64, i64, i64
  }
  return %r#2 : i64
}

// Points of a size x size grid over [-2, 1] x [-1, 1] that stay within radius 2
// for `limit` iterations.
func.func @mandelbrot(%size: i64, %limit: i64) -> i64 {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %f0 = arith.constant 0.0 : f64
  %f1 = arith.constant 1.0 : f64
  %f2 = arith.constant 2.0 : f64
  %f3 = arith.constant 3.0 : f64
  %f4 = arith.constant 4.0 : f64
  %sizef = arith.sitofp %size : i64 to f64
  %rows:2 = scf.while (%py = %c0, %inside = %c0) : (i64, i64) -> (i64, i64) {
    %more = arith.cmpi slt, %py, %size : i64
    scf.condition(%more) %py, %inside : i64, i64
  } do {
  ^bb0(%py: i64, %inside: i64):
    %pyf = arith.sitofp %py : i64 to f64
    %ci0 = arith.mulf %f2, %pyf : f64
    %ci1 = arith.divf %ci0, %sizef : f64
    %ci = arith.subf %ci1, %f1 : f64
    %cols:2 = scf.while (%px = %c0, %in2 = %inside) : (i64, i64) -> (i64, i64) {
      %more2 = arith.cmpi slt, %px, %size : i64
      scf.condition(%more2) %px, %in2 : i64, i64
    } do {
    ^bb1(%px: i64, %in2: i64):
      %pxf = arith.sitofp %px : i64 to f64
      %cr0 = arith.mulf %f3, %pxf : f64
      %cr1 = arith.divf %cr0, %sizef : f64
      %cr = arith.subf %cr1, %f2 : f64
      %z:3 = scf.while (%zr = %f0, %zi = %f0, %n = %c0) : (f64, f64, i64) -> (f64, f64, i64) {
        %under = arith.cmpi slt, %n, %limit : i64
        %zr2 = arith.mulf %zr, %zr : f64
        %zi2 = arith.mulf %zi, %zi : f64
        %m = arith.addf %zr2, %zi2 : f64
        %near = arith.cmpf ole, %m, %f4 : f64
        %go = arith.andi %under, %near : i1
        scf.condition(%go) %zr, %zi, %n : f64, f64, i64
      } do {
      ^bb2(%zr: f64, %zi: f64, %n: i64):
        %zr2 = arith.mulf %zr, %zr : f64
        %zi2 = arith.mulf %zi, %zi : f64
        %d = arith.subf %zr2, %zi2 : f64
        %nzr = arith.addf %d, %cr : f64
        %p = arith.mulf %f2, %zr : f64
        %q = arith.mulf %p, %zi : f64
        %nzi = arith.addf %q, %ci : f64
        %n1 = arith.addi %n, %c1 : i64
        scf.yield %nzr, %nzi, %n1 : f64, f64, i64
      }
      %hit = arith.cmpi eq, %z#2, %limit : i64
      %add = arith.extui %hit : i1 to i64
      %in3 = arith.addi %in2, %add : i64
      %px1 = arith.addi %px, %c1 : i64
      scf.yield %px1, %in3 : i64, i64
    }
    %py1 = arith.addi %py, %c1 : i64
    scf.yield %py1, %cols#1 : i64, i64
  }
  return %rows#1 : i64
}
