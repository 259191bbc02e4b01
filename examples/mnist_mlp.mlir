// An MNIST-sized MLP: 784-512-512-10 on a batch of 32, relu between layers, f32 logits.
// Weights are arguments: w1 784x512, w2 512x512, w3 512x10 and their biases.
func.func @predict(%x: tensor<32x784xf32>,
                   %w1: tensor<784x512xf32>, %b1: tensor<512xf32>,
                   %w2: tensor<512x512xf32>, %b2: tensor<512xf32>,
                   %w3: tensor<512x10xf32>, %b3: tensor<10xf32>) -> tensor<32x10xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<32x512xf32>

  %m1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0]
      : (tensor<32x784xf32>, tensor<784x512xf32>) -> tensor<32x512xf32>
  %c1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<512xf32>) -> tensor<32x512xf32>
  %a1 = stablehlo.add %m1, %c1 : tensor<32x512xf32>
  %h1 = stablehlo.maximum %a1, %zero : tensor<32x512xf32>

  %m2 = stablehlo.dot_general %h1, %w2, contracting_dims = [1] x [0]
      : (tensor<32x512xf32>, tensor<512x512xf32>) -> tensor<32x512xf32>
  %c2 = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<512xf32>) -> tensor<32x512xf32>
  %a2 = stablehlo.add %m2, %c2 : tensor<32x512xf32>
  %h2 = stablehlo.maximum %a2, %zero : tensor<32x512xf32>

  %m3 = stablehlo.dot_general %h2, %w3, contracting_dims = [1] x [0]
      : (tensor<32x512xf32>, tensor<512x10xf32>) -> tensor<32x10xf32>
  %c3 = stablehlo.broadcast_in_dim %b3, dims = [1] : (tensor<10xf32>) -> tensor<32x10xf32>
  %logits = stablehlo.add %m3, %c3 : tensor<32x10xf32>
  return %logits : tensor<32x10xf32>
}
