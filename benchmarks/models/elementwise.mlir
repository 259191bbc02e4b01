// A long elementwise chain over 1M f32 (1024x1024), one linalg.generic:
//   t  = tanh(x * y + x)
//   e  = exp(t)                          (in [1/e, e], never 0)
//   r  = sqrt(|max(e, y) - x|) / e
//   out = min(r * 0.5 + t, 2.0)
// 12 scalar ops per element.
#id = affine_map<(i, j) -> (i, j)>
func.func @predict(%x: tensor<1024x1024xf32>, %y: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %half = arith.constant 0.5 : f32
  %two = arith.constant 2.0 : f32
  %init = tensor.empty() : tensor<1024x1024xf32>
  %out = linalg.generic {indexing_maps = [#id, #id, #id],
                         iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<1024x1024xf32>, tensor<1024x1024xf32>)
      outs(%init : tensor<1024x1024xf32>) {
    ^bb0(%a: f32, %b: f32, %unused: f32):
      %ab = arith.mulf %a, %b : f32
      %s = arith.addf %ab, %a : f32
      %t = math.tanh %s : f32
      %e = math.exp %t : f32
      %m = arith.maximumf %e, %b : f32
      %d = arith.subf %m, %a : f32
      %abs = math.absf %d : f32
      %sq = math.sqrt %abs : f32
      %r = arith.divf %sq, %e : f32
      %h = arith.mulf %r, %half : f32
      %u = arith.addf %h, %t : f32
      %o = arith.minimumf %u, %two : f32
      linalg.yield %o : f32
  } -> tensor<1024x1024xf32>
  return %out : tensor<1024x1024xf32>
}
