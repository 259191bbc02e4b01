// CORPUS-FLAGS: --iree-input-demote-f64-to-f32=false
// Elementwise tensor programs over several element types (i8, i16, i32, i64,
// f32, f64), scalars mixed with tensors, and functions with several results.
// Each compiles to VMVX dispatches driven by HAL calls from VM code.

func.func @add_f32(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}

// Scale and shift a 2-D tensor by scalar arguments: y = x * s + t.
func.func @affine_f32(%x: tensor<2x3xf32>, %s: f32, %t: f32) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    %a = arith.addf %m, %t : f32
    linalg.yield %a : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// Integer element types: wrap-around add on i8, multiply on i16, shifts on i32.
func.func @int_elementwise(%a: tensor<4xi8>, %b: tensor<4xi8>, %c: tensor<4xi16>, %d: tensor<4xi32>)
    -> (tensor<4xi8>, tensor<4xi16>, tensor<4xi32>) {
  %s8 = arith.addi %a, %b : tensor<4xi8>
  %m16 = arith.muli %c, %c : tensor<4xi16>
  %two = arith.constant dense<2> : tensor<4xi32>
  %sh = arith.shli %d, %two : tensor<4xi32>
  %x = arith.xori %sh, %d : tensor<4xi32>
  return %s8, %m16, %x : tensor<4xi8>, tensor<4xi16>, tensor<4xi32>
}

// i64 and f64 tensors: 64-bit arithmetic inside dispatches.
func.func @wide_elementwise(%a: tensor<3xi64>, %b: tensor<3xf64>) -> (tensor<3xi64>, tensor<3xf64>) {
  %big = arith.constant dense<4294967296> : tensor<3xi64>
  %s = arith.addi %a, %big : tensor<3xi64>
  %m = arith.mulf %b, %b : tensor<3xf64>
  return %s, %m : tensor<3xi64>, tensor<3xf64>
}

// Type conversions inside a dispatch: i8 -> f32 (signed), f32 -> i32.
func.func @convert_types(%a: tensor<5xi8>, %b: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xi32>) {
  %f = arith.sitofp %a : tensor<5xi8> to tensor<5xf32>
  %i = arith.fptosi %b : tensor<5xf32> to tensor<5xi32>
  return %f, %i : tensor<5xf32>, tensor<5xi32>
}

// Four results of mixed kinds: a tensor, its elementwise max with zero, a
// scalar sum (tensor.extract of a reduction) and the scalar argument passed through.
func.func @multi_result(%x: tensor<4xf32>, %k: i32) -> (tensor<4xf32>, tensor<4xf32>, f32, i32) {
  %zero = arith.constant dense<0.0> : tensor<4xf32>
  %relu = arith.maximumf %x, %zero : tensor<4xf32>
  %init = arith.constant dense<0.0> : tensor<f32>
  %sum = linalg.reduce ins(%x : tensor<4xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %s = tensor.extract %sum[] : tensor<f32>
  %c1 = arith.constant 1 : i32
  %k1 = arith.addi %k, %c1 : i32
  return %x, %relu, %s, %k1 : tensor<4xf32>, tensor<4xf32>, f32, i32
}

// Elementwise select with a compare: where(a > b, a, b * 2).
func.func @where_f32(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
  %c = arith.cmpf ogt, %a, %b : tensor<6xf32>
  %two = arith.constant dense<2.0> : tensor<6xf32>
  %b2 = arith.mulf %b, %two : tensor<6xf32>
  %r = arith.select %c, %a, %b2 : tensor<6xi1>, tensor<6xf32>
  return %r : tensor<6xf32>
}
