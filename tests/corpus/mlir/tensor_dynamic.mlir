// Dynamically shaped tensors: sizes are only known at run time, so the VM
// code computes buffer sizes and dispatch workgroup counts from tensor.dim.

func.func @scale_dyn(%x: tensor<?xf32>, %s: f32) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// Sum of a dynamic vector plus its length as an index-derived i32.
func.func @sum_dyn(%x: tensor<?xf32>) -> (f32, i32) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %init = arith.constant dense<0.0> : tensor<f32>
  %sum = linalg.reduce ins(%x : tensor<?xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %s = tensor.extract %sum[] : tensor<f32>
  %ni = arith.index_cast %n : index to i32
  return %s, %ni : f32, i32
}

// Matmul with a dynamic number of rows: (?x3) * (3x2) -> (?x2).
func.func @matmul_dyn(%a: tensor<?x3xf32>, %b: tensor<3x2xf32>) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %m = tensor.dim %a, %c0 : tensor<?x3xf32>
  %e = tensor.empty(%m) : tensor<?x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x3xf32>, tensor<3x2xf32>) outs(%f : tensor<?x2xf32>) -> tensor<?x2xf32>
  return %r : tensor<?x2xf32>
}

// Concatenate two dynamic vectors (result size is the sum of both sizes).
func.func @concat_dyn(%a: tensor<?xi32>, %b: tensor<?xi32>) -> tensor<?xi32> {
  %r = tensor.concat dim(0) %a, %b : (tensor<?xi32>, tensor<?xi32>) -> tensor<?xi32>
  return %r : tensor<?xi32>
}
