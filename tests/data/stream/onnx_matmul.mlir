// A model as iree-import-onnx writes it (torch dialect): IREE makes an async entry
// point with fences (@main_graph$async) and a synchronous wrapper calling it.
module {
  func.func @main_graph(%arg0: !torch.vtensor<[4,8],f32>, %arg1: !torch.vtensor<[8,4],f32>) -> !torch.vtensor<[4,4],f32> attributes {torch.onnx_meta.ir_version = 8 : si64, torch.onnx_meta.opset_version = 17 : si64, torch.onnx_meta.producer_name = "test", torch.onnx_meta.producer_version = "1"} {
    %0 = torch.operator "onnx.MatMul"(%arg0, %arg1) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[8,4],f32>) -> !torch.vtensor<[4,4],f32>
    %1 = torch.operator "onnx.Relu"(%0) : (!torch.vtensor<[4,4],f32>) -> !torch.vtensor<[4,4],f32>
    %2 = torch.operator "onnx.MatMul"(%1, %1) : (!torch.vtensor<[4,4],f32>, !torch.vtensor<[4,4],f32>) -> !torch.vtensor<[4,4],f32>
    return %2 : !torch.vtensor<[4,4],f32>
  }
}
