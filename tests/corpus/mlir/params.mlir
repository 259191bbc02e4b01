// Weights stored outside the module as named parameters (scope "model"),
// loaded at run time from an IRPA archive built from params.params.

util.global private @weight = #stream.parameter.named<"model"::"weight"> : tensor<4x3xf32>
util.global private @bias = #stream.parameter.named<"model"::"bias"> : tensor<3xf32>
util.global private @scale = #stream.parameter.named<"model"::"scale"> : tensor<i32>

// y = x @ weight + bias
func.func @linear(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = util.global.load @weight : tensor<4x3xf32>
  %b = util.global.load @bias : tensor<3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x3xf32>) outs(%f : tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<2x3xf32>, tensor<3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// Returns the scalar i32 parameter times k (a parameter read into a scalar).
func.func @scaled(%k: i32) -> i32 {
  %s = util.global.load @scale : tensor<i32>
  %v = tensor.extract %s[] : tensor<i32>
  %r = arith.muli %v, %k : i32
  return %r : i32
}
