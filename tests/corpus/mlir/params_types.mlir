// CORPUS-FLAGS: --iree-input-demote-f64-to-f32=false
// Parameters of every integer and float width in two scopes ("a", "b"), loaded
// with io_parameters.load (one call per scope; zero-copy where the runtime can),
// returned as they are and combined in arithmetic.

util.global private @i8s = #flow.parameter.named<"a"::"i8s"> : tensor<8xi8>
util.global private @i16s = #flow.parameter.named<"a"::"i16s"> : tensor<2x3xi16>
util.global private @i32s = #flow.parameter.named<"a"::"i32s"> : tensor<4xi32>
util.global private @i64s = #flow.parameter.named<"b"::"i64s"> : tensor<3xi64>
util.global private @f32s = #flow.parameter.named<"b"::"f32s"> : tensor<2x2xf32>
util.global private @f64s = #flow.parameter.named<"b"::"f64s"> : tensor<2xf64>
util.global private @k = #flow.parameter.named<"b"::"k"> : tensor<i32>

func.func @get_i8() -> tensor<8xi8> {
  %0 = util.global.load @i8s : tensor<8xi8>
  return %0 : tensor<8xi8>
}
func.func @get_i16() -> tensor<2x3xi16> {
  %0 = util.global.load @i16s : tensor<2x3xi16>
  return %0 : tensor<2x3xi16>
}
func.func @get_i64() -> tensor<3xi64> {
  %0 = util.global.load @i64s : tensor<3xi64>
  return %0 : tensor<3xi64>
}
func.func @get_f64() -> tensor<2xf64> {
  %0 = util.global.load @f64s : tensor<2xf64>
  return %0 : tensor<2xf64>
}

// x * i32s + k, elementwise.
func.func @affine(%x: tensor<4xi32>) -> tensor<4xi32> {
  %w = util.global.load @i32s : tensor<4xi32>
  %kt = util.global.load @k : tensor<i32>
  %k = tensor.extract %kt[] : tensor<i32>
  %e = tensor.empty() : tensor<4xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x, %w : tensor<4xi32>, tensor<4xi32>) outs(%e : tensor<4xi32>) {
  ^bb0(%a: i32, %b: i32, %o: i32):
    %m = arith.muli %a, %b : i32
    %s = arith.addi %m, %k : i32
    linalg.yield %s : i32
  } -> tensor<4xi32>
  return %r : tensor<4xi32>
}

// f32s @ x for a 2x2 matrix and a 2-vector.
func.func @matvec(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = util.global.load @f32s : tensor<2x2xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  %r = linalg.matvec ins(%w, %x : tensor<2x2xf32>, tensor<2xf32>) outs(%f : tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
