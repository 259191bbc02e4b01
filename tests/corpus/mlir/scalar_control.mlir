// Structured control flow on scalars: scf.if / scf.while / scf.for with loop
// carried values, and calls between functions (no recursion). Lowers to VM
// blocks with block arguments, cond_br and calls.

// Number of Collatz steps needed to reach 1 (scf.while with two carried values).
func.func @collatz_steps(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %r:2 = scf.while (%x = %n, %steps = %c0) : (i32, i32) -> (i32, i32) {
    %more = arith.cmpi sgt, %x, %c1 : i32
    scf.condition(%more) %x, %steps : i32, i32
  } do {
  ^bb0(%x: i32, %steps: i32):
    %odd = arith.andi %x, %c1 : i32
    %is_odd = arith.cmpi ne, %odd, %c0 : i32
    %next = scf.if %is_odd -> i32 {
      %t = arith.muli %x, %c3 : i32
      %u = arith.addi %t, %c1 : i32
      scf.yield %u : i32
    } else {
      %h = arith.divui %x, %c2 : i32
      scf.yield %h : i32
    }
    %s = arith.addi %steps, %c1 : i32
    scf.yield %next, %s : i32, i32
  }
  return %r#1 : i32
}

// Sum of i*i for i in [0, n) with an i64 accumulator (scf.for over index).
func.func @sum_squares(%n: i32) -> i64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0 : i64
  %ub = arith.index_cast %n : i32 to index
  %sum = scf.for %i = %c0 to %ub step %c1 iter_args(%acc = %zero) -> (i64) {
    %ii = arith.index_cast %i : index to i64
    %sq = arith.muli %ii, %ii : i64
    %next = arith.addi %acc, %sq : i64
    scf.yield %next : i64
  }
  return %sum : i64
}

// Greatest common divisor with Euclid's algorithm on i64.
func.func @gcd_i64(%a: i64, %b: i64) -> i64 {
  %c0 = arith.constant 0 : i64
  %r:2 = scf.while (%x = %a, %y = %b) : (i64, i64) -> (i64, i64) {
    %nz = arith.cmpi ne, %y, %c0 : i64
    scf.condition(%nz) %x, %y : i64, i64
  } do {
  ^bb0(%x: i64, %y: i64):
    %m = arith.remui %x, %y : i64
    scf.yield %y, %m : i64, i64
  }
  return %r#0 : i64
}

// Nested loops: count the pairs (i, j) with 0 <= i < j < n and (i + j) % 3 == 0.
func.func @count_pairs(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %total = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
    %j0 = arith.addi %i, %c1 : i32
    %inner = scf.for %j = %j0 to %n step %c1 iter_args(%acc2 = %acc) -> (i32) : i32 {
      %s = arith.addi %i, %j : i32
      %m = arith.remsi %s, %c3 : i32
      %hit = arith.cmpi eq, %m, %c0 : i32
      %inc = arith.extui %hit : i1 to i32
      %next = arith.addi %acc2, %inc : i32
      scf.yield %next : i32
    }
    scf.yield %inner : i32
  }
  return %total : i32
}

// Helpers kept as separate VM functions (never inlined) so calls survive.
util.func private @clamp_helper(%x: i32, %lo: i32, %hi: i32) -> i32 attributes {inlining_policy = #util.inline.never} {
  %a = arith.maxsi %x, %lo : i32
  %b = arith.minsi %a, %hi : i32
  util.return %b : i32
}

util.func private @poly_helper(%x: f32) -> f32 attributes {inlining_policy = #util.inline.never} {
  %c2 = arith.constant 2.0 : f32
  %c1 = arith.constant 1.0 : f32
  %sq = arith.mulf %x, %x : f32
  %t = arith.mulf %c2, %x : f32
  %s = arith.addf %sq, %t : f32
  %r = arith.addf %s, %c1 : f32
  util.return %r : f32
}

// Calls the clamp helper three times and the float helper once.
func.func @call_chain(%x: i32, %y: f32) -> (i32, f32) {
  %c0 = arith.constant 0 : i32
  %c10 = arith.constant 10 : i32
  %c5 = arith.constant 5 : i32
  %a = util.call @clamp_helper(%x, %c0, %c10) : (i32, i32, i32) -> i32
  %b = arith.muli %a, %c5 : i32
  %c = util.call @clamp_helper(%b, %c0, %c10) : (i32, i32, i32) -> i32
  %d = util.call @clamp_helper(%c, %a, %c10) : (i32, i32, i32) -> i32
  %f = util.call @poly_helper(%y) : (f32) -> f32
  return %d, %f : i32, f32
}

// A piecewise function picked with scf.if chains returning two values.
func.func @piecewise(%x: i32) -> (i32, i32) {
  %c0 = arith.constant 0 : i32
  %c100 = arith.constant 100 : i32
  %neg = arith.cmpi slt, %x, %c0 : i32
  %r:2 = scf.if %neg -> (i32, i32) {
    %m = arith.subi %c0, %x : i32
    %k = arith.constant -1 : i32
    scf.yield %m, %k : i32, i32
  } else {
    %big = arith.cmpi sge, %x, %c100 : i32
    %s:2 = scf.if %big -> (i32, i32) {
      %k = arith.constant 2 : i32
      scf.yield %c100, %k : i32, i32
    } else {
      %sq = arith.muli %x, %x : i32
      %k = arith.constant 1 : i32
      scf.yield %sq, %k : i32, i32
    }
    scf.yield %s#0, %s#1 : i32, i32
  }
  return %r#0, %r#1 : i32, i32
}
