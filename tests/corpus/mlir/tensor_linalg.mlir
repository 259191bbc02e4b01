// Linear algebra and neural-network style tensor programs: matmul, row
// reductions, softmax, 1-D and 2-D convolution, transpose.

func.func @matmul_f32(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = linalg.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x2xf32>) outs(%f : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

func.func @matmul_i32(%a: tensor<3x4xi32>, %b: tensor<4x2xi32>) -> tensor<3x2xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<3x2xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<3x2xi32>) -> tensor<3x2xi32>
  %r = linalg.matmul ins(%a, %b : tensor<3x4xi32>, tensor<4x2xi32>) outs(%f : tensor<3x2xi32>) -> tensor<3x2xi32>
  return %r : tensor<3x2xi32>
}

// Row sums and row maxima of a 3x4 matrix.
func.func @row_reduce(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %z = arith.constant 0.0 : f32
  %ninf = arith.constant -3.40282347E+38 : f32
  %e = tensor.empty() : tensor<3xf32>
  %fz = linalg.fill ins(%z : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %sum = linalg.reduce ins(%x : tensor<3x4xf32>) outs(%fz : tensor<3xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %max = linalg.reduce ins(%x : tensor<3x4xf32>) outs(%fm : tensor<3xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %a = arith.maximumf %in, %acc : f32
      linalg.yield %a : f32
    }
  return %sum, %max : tensor<3xf32>, tensor<3xf32>
}

// Numerically stable softmax over the last dimension of a 2x4 tensor,
// written out as max / exp / sum / divide.
func.func @softmax(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %ninf = arith.constant -3.40282347E+38 : f32
  %z = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<2xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2xf32>) -> tensor<2xf32>
  %max = linalg.reduce ins(%x : tensor<2x4xf32>) outs(%fm : tensor<2xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %a = arith.maximumf %in, %acc : f32
      linalg.yield %a : f32
    }
  %ex = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<2x4xf32>, tensor<2xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %p = math.exp %d : f32
    linalg.yield %p : f32
  } -> tensor<2x4xf32>
  %fz = linalg.fill ins(%z : f32) outs(%e1 : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4xf32>) outs(%fz : tensor<2xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sum : tensor<2x4xf32>, tensor<2xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %q = arith.divf %v, %s : f32
    linalg.yield %q : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// 1-D convolution (valid padding) of an 8-element signal with a 3-tap kernel.
func.func @conv1d(%x: tensor<8xf32>, %k: tensor<3xf32>) -> tensor<6xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<6xf32>) -> tensor<6xf32>
  %r = linalg.conv_1d ins(%x, %k : tensor<8xf32>, tensor<3xf32>) outs(%f : tensor<6xf32>) -> tensor<6xf32>
  return %r : tensor<6xf32>
}

// 2-D NHWC/HWCF convolution: 1x4x4x1 input, 2x2x1x2 filter, stride 1.
func.func @conv2d(%x: tensor<1x4x4x1xf32>, %w: tensor<2x2x1x2xf32>) -> tensor<1x3x3x2xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x3x3x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x4x4x1xf32>, tensor<2x2x1x2xf32>) outs(%f : tensor<1x3x3x2xf32>) -> tensor<1x3x3x2xf32>
  return %r : tensor<1x3x3x2xf32>
}

func.func @transpose(%x: tensor<2x3xi32>) -> tensor<3x2xi32> {
  %e = tensor.empty() : tensor<3x2xi32>
  %r = linalg.transpose ins(%x : tensor<2x3xi32>) outs(%e : tensor<3x2xi32>) permutation = [1, 0]
  return %r : tensor<3x2xi32>
}
