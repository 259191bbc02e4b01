// A loop whose condition the host must read back: IREE's stream IR for it has a
// host load (stream.async.load) and control flow (scf.if), which the stream
// importer cannot map (tests/stream/test_stream_import.py lists them).
func.func @halve_until_small(%x: tensor<4xf32>) -> tensor<4xf32> {
  %result = stablehlo.while(%value = %x) : tensor<4xf32>
    cond {
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %sum = stablehlo.reduce(%value init: %zero) applies stablehlo.add across dimensions = [0]
          : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %one = stablehlo.constant dense<1.0> : tensor<f32>
      %large = stablehlo.compare GT, %sum, %one : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %large : tensor<i1>
    } do {
      %half = stablehlo.constant dense<0.5> : tensor<4xf32>
      %next = stablehlo.multiply %value, %half : tensor<4xf32>
      stablehlo.return %next : tensor<4xf32>
    }
  return %result : tensor<4xf32>
}
