// Module state held in util.global: a mutable i32 counter, a mutable i64
// accumulator, a mutable tensor and an immutable initialized constant table.

util.global private mutable @counter = 0 : i32
util.global private mutable @total = 100 : i64
util.global private mutable @history = dense<0.0> : tensor<4xf32>
util.global private @table = dense<[1.0, 2.0, 4.0, 8.0]> : tensor<4xf32>

// Stateful counter: every call adds one and returns the new value.
func.func @next_counter() -> i32 {
  %c = util.global.load @counter : i32
  %one = arith.constant 1 : i32
  %n = arith.addi %c, %one : i32
  util.global.store %n, @counter : i32
  return %n : i32
}

// Calls the counter n times in a loop, returns the final value.
func.func @bump(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
    %v = func.call @next_counter() : () -> i32
    scf.yield %v : i32
  }
  return %last : i32
}

// Adds x to the i64 accumulator (initialized to 100) and returns it.
func.func @accumulate(%x: i64) -> i64 {
  %t = util.global.load @total : i64
  %n = arith.addi %t, %x : i64
  util.global.store %n, @total : i64
  return %n : i64
}

// history += x * table; returns the updated history tensor.
func.func @record(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = util.global.load @history : tensor<4xf32>
  %t = util.global.load @table : tensor<4xf32>
  %p = arith.mulf %x, %t : tensor<4xf32>
  %n = arith.addf %h, %p : tensor<4xf32>
  util.global.store %n, @history : tensor<4xf32>
  return %n : tensor<4xf32>
}
