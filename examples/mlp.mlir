// A two-layer perceptron: 4 inputs -> 8 hidden (relu) -> 3 classes (softmax).
// Weights are constants so the module is self-contained.
func.func @predict(%x: tensor<1x4xf32>) -> tensor<1x3xf32> {
  %w1 = arith.constant dense<[
    [0.5, -0.25, 0.125, 1.0, -0.5, 0.75, 0.25, -1.0],
    [-0.75, 0.5, 1.0, -0.125, 0.25, -0.5, 0.5, 0.25],
    [0.25, 0.75, -0.5, 0.5, 1.0, 0.125, -0.25, 0.5],
    [1.0, -1.0, 0.25, -0.75, 0.5, 0.25, 0.75, -0.125]]> : tensor<4x8xf32>
  %b1 = arith.constant dense<[0.1, -0.1, 0.2, 0.0, -0.2, 0.3, 0.05, -0.05]> : tensor<8xf32>
  %w2 = arith.constant dense<[
    [0.5, -0.5, 0.25], [0.25, 0.75, -0.5], [-0.25, 0.5, 1.0], [1.0, -0.25, 0.125],
    [0.125, 0.25, -0.75], [-0.5, 1.0, 0.5], [0.75, -0.125, 0.25], [0.5, 0.5, -0.25]]> : tensor<8x3xf32>
  %b2 = arith.constant dense<[0.0, 0.1, -0.1]> : tensor<3xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<1x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<1x4xf32>, tensor<4x8xf32>) outs(%f1 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %hb = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%h, %b1 : tensor<1x8xf32>, tensor<8xf32>) outs(%e1 : tensor<1x8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %r = arith.maximumf %s, %zero : f32
      linalg.yield %r : f32
  } -> tensor<1x8xf32>
  %e2 = tensor.empty() : tensor<1x3xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x3xf32>) -> tensor<1x3xf32>
  %o = linalg.matmul ins(%hb, %w2 : tensor<1x8xf32>, tensor<8x3xf32>) outs(%f2 : tensor<1x3xf32>) -> tensor<1x3xf32>
  %ob = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%o, %b2 : tensor<1x3xf32>, tensor<3xf32>) outs(%e2 : tensor<1x3xf32>) {
    ^bb0(%a: f32, %b: f32, %out: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
  } -> tensor<1x3xf32>
  %p = linalg.softmax dimension(1) ins(%ob : tensor<1x3xf32>) outs(%e2 : tensor<1x3xf32>) -> tensor<1x3xf32>
  return %p : tensor<1x3xf32>
}
