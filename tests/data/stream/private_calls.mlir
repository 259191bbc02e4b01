// A training-step shape as JAX exports it (tests/stream/test_stream_import.py): private
// functions reached by `call` (@relu, @log_softmax) and a scalar constant expression
// (-1/4) that IREE evaluates at compile time in a nested jit_eval module.
module @jit_step {
  func.func public @main(%w: tensor<8x8xf32>, %x: tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
    %h = call @relu(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = stablehlo.dot_general %h, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s = call @log_softmax(%y) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %four = stablehlo.constant dense<4.0> : tensor<f32>
    %minus = stablehlo.negate %one : tensor<f32>
    %l = stablehlo.divide %minus, %four : tensor<f32>
    %lb = stablehlo.broadcast_in_dim %l, dims = [] : (tensor<f32>) -> tensor<8x8xf32>
    %g = stablehlo.dot_general %h, %s, contracting_dims = [0] x [0] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %g2 = stablehlo.multiply %g, %lb : tensor<8x8xf32>
    %w2 = stablehlo.subtract %w, %g2 : tensor<8x8xf32>
    return %w2, %s : tensor<8x8xf32>, tensor<4x8xf32>
  }
  func.func private @relu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %z = stablehlo.constant dense<0.0> : tensor<4x8xf32>
    %r = stablehlo.maximum %x, %z : tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
  func.func private @log_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %e = stablehlo.exponential %x : tensor<4x8xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %ls = stablehlo.log %s : tensor<4xf32>
    %b = stablehlo.broadcast_in_dim %ls, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
    %r = stablehlo.subtract %x, %b : tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}
