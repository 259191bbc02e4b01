// CORPUS-FLAGS: --iree-stream-resource-memory-model=discrete
// Parameters packed into one buffer with io_parameters.gather (the discrete memory
// model makes the compiler gather instead of load), from two scopes, next to a
// mutable parameter global (loaded into a fresh buffer, then updated in place).

util.global private @w = #flow.parameter.named<"model"::"w"> : tensor<3x2xf32>
util.global private @b = #flow.parameter.named<"model"::"b"> : tensor<2xf32>
util.global private @t = #flow.parameter.named<"extra"::"t"> : tensor<4xi16>
util.global private mutable @acc = #flow.parameter.named<"model"::"acc"> : tensor<4xi32>

// x @ w + b
func.func @dense(%x: tensor<1x3xf32>) -> tensor<1x2xf32> {
  %w = util.global.load @w : tensor<3x2xf32>
  %b = util.global.load @b : tensor<2xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x2xf32>) -> tensor<1x2xf32>
  %m = linalg.matmul ins(%x, %w : tensor<1x3xf32>, tensor<3x2xf32>) outs(%f : tensor<1x2xf32>) -> tensor<1x2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<1x2xf32>, tensor<2xf32>) outs(%e : tensor<1x2xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<1x2xf32>
  return %r : tensor<1x2xf32>
}

func.func @get_t() -> tensor<4xi16> {
  %0 = util.global.load @t : tensor<4xi16>
  return %0 : tensor<4xi16>
}

// acc += x; returns the new acc (starts from the parameter's value).
func.func @accumulate(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = util.global.load @acc : tensor<4xi32>
  %1 = arith.addi %0, %x : tensor<4xi32>
  util.global.store %1, @acc : tensor<4xi32>
  return %1 : tensor<4xi32>
}
