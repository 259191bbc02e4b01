// A small scalar program for `vmrt run`: three classic loops on i32, i64 and
// f32 values, and a `demo` export that runs all three at once.
//
// Build (the bundled examples/scalar.vmfb is this file compiled):
//   iree-compile --iree-hal-target-device=local \
//     --iree-hal-local-target-device-backends=vmvx \
//     examples/scalar.mlir -o examples/scalar.vmfb
// Run:
//   vmrt run --module=examples/scalar.vmfb --function=demo \
//     --input=1071 --input=462 --input=27 --input=2
// (the same flags work with iree-run-module and print the same lines).

// Greatest common divisor of |a| and |b| by Euclid's algorithm.
func.func @gcd(%a: i32, %b: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %abs_a = math.absi %a : i32
  %abs_b = math.absi %b : i32
  %result:2 = scf.while (%x = %abs_a, %y = %abs_b) : (i32, i32) -> (i32, i32) {
    %more = arith.cmpi ne, %y, %zero : i32
    scf.condition(%more) %x, %y : i32, i32
  } do {
  ^bb0(%x: i32, %y: i32):
    %r = arith.remsi %x, %y : i32
    scf.yield %y, %r : i32, i32
  }
  return %result#0 : i32
}

// Collatz sequence from n: the number of steps to reach 1 and the largest
// value met on the way (as i64: the sequence climbs high for some n).
func.func @collatz(%n: i32) -> (i32, i64) {
  %one = arith.constant 1 : i64
  %two = arith.constant 2 : i64
  %three = arith.constant 3 : i64
  %zero_steps = arith.constant 0 : i32
  %one_step = arith.constant 1 : i32
  %start = arith.extsi %n : i32 to i64
  %result:3 = scf.while (%x = %start, %steps = %zero_steps, %peak = %start)
      : (i64, i32, i64) -> (i64, i32, i64) {
    %more = arith.cmpi sgt, %x, %one : i64
    scf.condition(%more) %x, %steps, %peak : i64, i32, i64
  } do {
  ^bb0(%x: i64, %steps: i32, %peak: i64):
    %low_bit = arith.andi %x, %one : i64
    %is_odd = arith.cmpi eq, %low_bit, %one : i64
    %next = scf.if %is_odd -> i64 {
      %tripled = arith.muli %x, %three : i64
      %up = arith.addi %tripled, %one : i64
      scf.yield %up : i64
    } else {
      %down = arith.divsi %x, %two : i64
      scf.yield %down : i64
    }
    %new_steps = arith.addi %steps, %one_step : i32
    %new_peak = arith.maxsi %peak, %next : i64
    scf.yield %next, %new_steps, %new_peak : i64, i32, i64
  }
  return %result#1, %result#2 : i32, i64
}

// Square root of x > 0 by Newton's method, r' = (r + x / r) / 2, from r = x,
// until r stops changing (at most 100 steps). Returns the root and the number
// of steps taken.
func.func @newton_sqrt(%x: f32) -> (f32, i32) {
  %half = arith.constant 0.5 : f32
  %zero_steps = arith.constant 0 : i32
  %one_step = arith.constant 1 : i32
  %max_steps = arith.constant 100 : i32
  %true = arith.constant true
  %result:3 = scf.while (%r = %x, %steps = %zero_steps, %changed = %true)
      : (f32, i32, i1) -> (f32, i32, i1) {
    %budget = arith.cmpi slt, %steps, %max_steps : i32
    %more = arith.andi %changed, %budget : i1
    scf.condition(%more) %r, %steps, %changed : f32, i32, i1
  } do {
  ^bb0(%r: f32, %steps: i32, %changed: i1):
    %quotient = arith.divf %x, %r : f32
    %sum = arith.addf %r, %quotient : f32
    %next = arith.mulf %sum, %half : f32
    %still_changing = arith.cmpf one, %next, %r : f32
    %new_steps = arith.addi %steps, %one_step : i32
    scf.yield %next, %new_steps, %still_changing : f32, i32, i1
  }
  return %result#0, %result#1 : f32, i32
}

// All three at once: gcd(a, b), collatz(n) and newton_sqrt(x).
func.func @demo(%a: i32, %b: i32, %n: i32, %x: f32) -> (i32, i32, i64, f32, i32) {
  %g = call @gcd(%a, %b) : (i32, i32) -> i32
  %steps, %peak = call @collatz(%n) : (i32) -> (i32, i64)
  %root, %iterations = call @newton_sqrt(%x) : (f32) -> (f32, i32)
  return %g, %steps, %peak, %root, %iterations : i32, i32, i64, f32, i32
}
