// The tiny MLP of examples/mlp.mlir's shape: 1x4 -> 8 (relu) -> 3, weights as
// arguments. Per-call overhead dominates: it measures the runtime, not the math.
func.func @predict(%x: tensor<1x4xf32>,
                   %w1: tensor<4x8xf32>, %b1: tensor<8xf32>,
                   %w2: tensor<8x3xf32>, %b2: tensor<3xf32>) -> tensor<1x3xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<1x8xf32>
  %m1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
      : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  %c1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<8xf32>) -> tensor<1x8xf32>
  %a1 = stablehlo.add %m1, %c1 : tensor<1x8xf32>
  %h1 = stablehlo.maximum %a1, %zero : tensor<1x8xf32>
  %m2 = stablehlo.dot_general %h1, %w2, contracting_dims = [1] x [0]
      : (tensor<1x8xf32>, tensor<8x3xf32>) -> tensor<1x3xf32>
  %c2 = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
  %logits = stablehlo.add %m2, %c2 : tensor<1x3xf32>
  return %logits : tensor<1x3xf32>
}
