// Small CNN on one 64x64 RGB image (NHWC):
//   conv 3x3 (3 -> 32, padding same) + bias, relu
//   conv 3x3 (32 -> 32, padding same) + bias, relu
//   global average pool over 64x64, dense 32 -> 10.
// Kernels are HWIO (3x3xCinxCout); all weights are arguments.
func.func @predict(%x: tensor<1x64x64x3xf32>,
                   %k1: tensor<3x3x3x32xf32>, %b1: tensor<32xf32>,
                   %k2: tensor<3x3x32x32xf32>, %b2: tensor<32xf32>,
                   %w: tensor<32x10xf32>, %b: tensor<10xf32>) -> tensor<1x10xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<1x64x64x32xf32>

  %v1 = stablehlo.convolution(%x, %k1)
      dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {stride = [1, 1], pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x64x64x3xf32>, tensor<3x3x3x32xf32>) -> tensor<1x64x64x32xf32>
  %c1 = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<32xf32>) -> tensor<1x64x64x32xf32>
  %a1 = stablehlo.add %v1, %c1 : tensor<1x64x64x32xf32>
  %h1 = stablehlo.maximum %a1, %zero : tensor<1x64x64x32xf32>

  %v2 = stablehlo.convolution(%h1, %k2)
      dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {stride = [1, 1], pad = [[1, 1], [1, 1]]}
      {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
      : (tensor<1x64x64x32xf32>, tensor<3x3x32x32xf32>) -> tensor<1x64x64x32xf32>
  %c2 = stablehlo.broadcast_in_dim %b2, dims = [3] : (tensor<32xf32>) -> tensor<1x64x64x32xf32>
  %a2 = stablehlo.add %v2, %c2 : tensor<1x64x64x32xf32>
  %h2 = stablehlo.maximum %a2, %zero : tensor<1x64x64x32xf32>

  // Global average pool: sum over H and W, divided by 64 * 64.
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%h2 init: %init) applies stablehlo.add across dimensions = [1, 2]
      : (tensor<1x64x64x32xf32>, tensor<f32>) -> tensor<1x32xf32>
  %area = stablehlo.constant dense<4096.0> : tensor<1x32xf32>
  %pooled = stablehlo.divide %sum, %area : tensor<1x32xf32>

  %m = stablehlo.dot_general %pooled, %w, contracting_dims = [1] x [0]
      : (tensor<1x32xf32>, tensor<32x10xf32>) -> tensor<1x10xf32>
  %c = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<10xf32>) -> tensor<1x10xf32>
  %logits = stablehlo.add %m, %c : tensor<1x10xf32>
  return %logits : tensor<1x10xf32>
}
