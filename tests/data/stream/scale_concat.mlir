// A small model for the stream importer's tests (vmrt stream import / run): a weight
// loaded from parameter scope "model", a dense constant, an elementwise dispatch,
// a concatenation (alloca + updates), a slice of an argument and a splat result.
util.global private @scale = #flow.parameter.named<"model"::"scale"> : tensor<16xf32>
func.func @step(%a: tensor<16xf32>, %b: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<32xf32>, tensor<8xf32>, tensor<16xf32>, tensor<4xf32>) {
  %scale = util.global.load @scale : tensor<16xf32>
  %scaled = stablehlo.multiply %a, %scale : tensor<16xf32>
  %sum = stablehlo.add %scaled, %b : tensor<16xf32>
  %both = stablehlo.concatenate %a, %b, dim = 0 : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %head = stablehlo.slice %a [0:8] : (tensor<16xf32>) -> tensor<8xf32>
  %zeros = stablehlo.constant dense<0.0> : tensor<16xf32>
  %table = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  return %sum, %both, %head, %zeros, %table
      : tensor<16xf32>, tensor<32xf32>, tensor<8xf32>, tensor<16xf32>, tensor<4xf32>
}
