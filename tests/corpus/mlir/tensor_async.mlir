// CORPUS-FLAGS: --iree-execution-model=async-external
// Async-external functions (iree.abi.model = coarse-fences): callers append a
// wait fence and a signal fence, and wait on the signal fence for the results.
func.func @scale_add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %two = arith.constant dense<2.0> : tensor<4xf32>
  %m = arith.mulf %a, %two : tensor<4xf32>
  %s = arith.addf %m, %b : tensor<4xf32>
  return %s : tensor<4xf32>
}

func.func @sum_rows(%x: tensor<2x3xi32>) -> (tensor<2xi32>, tensor<2x3xi32>) {
  %zero = arith.constant 0 : i32
  %init = tensor.empty() : tensor<2xi32>
  %fill = linalg.fill ins(%zero : i32) outs(%init : tensor<2xi32>) -> tensor<2xi32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2x3xi32>) outs(%fill : tensor<2xi32>) {
  ^bb0(%v: i32, %acc: i32):
    %r = arith.addi %v, %acc : i32
    linalg.yield %r : i32
  } -> tensor<2xi32>
  return %sum, %x : tensor<2xi32>, tensor<2x3xi32>
}

func.func @count(%n: i32) -> i32 {
  %one = arith.constant 1 : i32
  %r = arith.addi %n, %one : i32
  return %r : i32
}
