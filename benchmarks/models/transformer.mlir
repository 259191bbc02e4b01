// One pre-norm transformer encoder block, batch 1, seq 128, d_model 256,
// 4 heads of 64, MLP 256 -> 1024 -> 256 with gelu (tanh form), f32:
//   h   = x + attention(layernorm1(x)) @ wo + bo
//   out = h + gelu(layernorm2(h) @ w1 + b1) @ w2 + b2
// attention: softmax(q k^T / sqrt(64)) v per head, q/k/v = ln @ w{q,k,v} + b{q,k,v}.
// Layernorm: eps 1e-5 over d_model, with scale g and shift b.
// The private helpers are inlined by iree-compile; @predict is the only export.
func.func @predict(%x: tensor<1x128x256xf32>,
                   %ln1_g: tensor<256xf32>, %ln1_b: tensor<256xf32>,
                   %wq: tensor<256x256xf32>, %bq: tensor<256xf32>,
                   %wk: tensor<256x256xf32>, %bk: tensor<256xf32>,
                   %wv: tensor<256x256xf32>, %bv: tensor<256xf32>,
                   %wo: tensor<256x256xf32>, %bo: tensor<256xf32>,
                   %ln2_g: tensor<256xf32>, %ln2_b: tensor<256xf32>,
                   %w1: tensor<256x1024xf32>, %b1: tensor<1024xf32>,
                   %w2: tensor<1024x256xf32>, %b2: tensor<256xf32>) -> tensor<1x128x256xf32> {
  %x2 = stablehlo.reshape %x : (tensor<1x128x256xf32>) -> tensor<128x256xf32>

  // Attention sub-block.
  %n1 = func.call @layernorm(%x2, %ln1_g, %ln1_b)
      : (tensor<128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  %q = func.call @dense256(%n1, %wq, %bq)
      : (tensor<128x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  %k = func.call @dense256(%n1, %wk, %bk)
      : (tensor<128x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  %v = func.call @dense256(%n1, %wv, %bv)
      : (tensor<128x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  // Split heads: [seq, head, 64].
  %qh = stablehlo.reshape %q : (tensor<128x256xf32>) -> tensor<128x4x64xf32>
  %kh = stablehlo.reshape %k : (tensor<128x256xf32>) -> tensor<128x4x64xf32>
  %vh = stablehlo.reshape %v : (tensor<128x256xf32>) -> tensor<128x4x64xf32>
  // scores[h, i, j] = sum_d q[i, h, d] * k[j, h, d] / 8
  %qk = stablehlo.dot_general %qh, %kh, batching_dims = [1] x [1], contracting_dims = [2] x [2]
      : (tensor<128x4x64xf32>, tensor<128x4x64xf32>) -> tensor<4x128x128xf32>
  %scale = stablehlo.constant dense<0.125> : tensor<4x128x128xf32>
  %scores = stablehlo.multiply %qk, %scale : tensor<4x128x128xf32>
  // Softmax over j, max-subtracted.
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %mx = stablehlo.reduce(%scores init: %ninf) applies stablehlo.maximum across dimensions = [2]
      : (tensor<4x128x128xf32>, tensor<f32>) -> tensor<4x128xf32>
  %mxb = stablehlo.broadcast_in_dim %mx, dims = [0, 1]
      : (tensor<4x128xf32>) -> tensor<4x128x128xf32>
  %sh = stablehlo.subtract %scores, %mxb : tensor<4x128x128xf32>
  %ex = stablehlo.exponential %sh : tensor<4x128x128xf32>
  %sum = stablehlo.reduce(%ex init: %zero) applies stablehlo.add across dimensions = [2]
      : (tensor<4x128x128xf32>, tensor<f32>) -> tensor<4x128xf32>
  %sumb = stablehlo.broadcast_in_dim %sum, dims = [0, 1]
      : (tensor<4x128xf32>) -> tensor<4x128x128xf32>
  %p = stablehlo.divide %ex, %sumb : tensor<4x128x128xf32>
  // ctx[h, i, d] = sum_j p[h, i, j] * v[j, h, d], back to [seq, d_model].
  %ctx = stablehlo.dot_general %p, %vh, batching_dims = [0] x [1], contracting_dims = [2] x [0]
      : (tensor<4x128x128xf32>, tensor<128x4x64xf32>) -> tensor<4x128x64xf32>
  %ctxt = stablehlo.transpose %ctx, dims = [1, 0, 2]
      : (tensor<4x128x64xf32>) -> tensor<128x4x64xf32>
  %ctx2 = stablehlo.reshape %ctxt : (tensor<128x4x64xf32>) -> tensor<128x256xf32>
  %att = func.call @dense256(%ctx2, %wo, %bo)
      : (tensor<128x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  %h = stablehlo.add %x2, %att : tensor<128x256xf32>

  // MLP sub-block.
  %n2 = func.call @layernorm(%h, %ln2_g, %ln2_b)
      : (tensor<128x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<128x256xf32>
  %u = stablehlo.dot_general %n2, %w1, contracting_dims = [1] x [0]
      : (tensor<128x256xf32>, tensor<256x1024xf32>) -> tensor<128x1024xf32>
  %b1b = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<1024xf32>) -> tensor<128x1024xf32>
  %ub = stablehlo.add %u, %b1b : tensor<128x1024xf32>
  %g = func.call @gelu(%ub) : (tensor<128x1024xf32>) -> tensor<128x1024xf32>
  %d = stablehlo.dot_general %g, %w2, contracting_dims = [1] x [0]
      : (tensor<128x1024xf32>, tensor<1024x256xf32>) -> tensor<128x256xf32>
  %b2b = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<256xf32>) -> tensor<128x256xf32>
  %db = stablehlo.add %d, %b2b : tensor<128x256xf32>
  %out = stablehlo.add %h, %db : tensor<128x256xf32>
  %out3 = stablehlo.reshape %out : (tensor<128x256xf32>) -> tensor<1x128x256xf32>
  return %out3 : tensor<1x128x256xf32>
}

// x @ w + b for a 256x256 weight.
func.func private @dense256(%x: tensor<128x256xf32>, %w: tensor<256x256xf32>,
                            %b: tensor<256xf32>) -> tensor<128x256xf32> {
  %m = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<128x256xf32>, tensor<256x256xf32>) -> tensor<128x256xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<128x256xf32>
  %r = stablehlo.add %m, %bb : tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}

// (x - mean) / sqrt(var + 1e-5) * g + b over the last axis (biased variance).
func.func private @layernorm(%x: tensor<128x256xf32>, %g: tensor<256xf32>,
                             %b: tensor<256xf32>) -> tensor<128x256xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<256.0> : tensor<128xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<128xf32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x256xf32>, tensor<f32>) -> tensor<128xf32>
  %mean = stablehlo.divide %s, %n : tensor<128xf32>
  %meanb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<128xf32>) -> tensor<128x256xf32>
  %c = stablehlo.subtract %x, %meanb : tensor<128x256xf32>
  %c2 = stablehlo.multiply %c, %c : tensor<128x256xf32>
  %s2 = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<128x256xf32>, tensor<f32>) -> tensor<128xf32>
  %var = stablehlo.divide %s2, %n : tensor<128xf32>
  %ve = stablehlo.add %var, %eps : tensor<128xf32>
  %inv = stablehlo.rsqrt %ve : tensor<128xf32>
  %invb = stablehlo.broadcast_in_dim %inv, dims = [0] : (tensor<128xf32>) -> tensor<128x256xf32>
  %gb = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<256xf32>) -> tensor<128x256xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<256xf32>) -> tensor<128x256xf32>
  %y = stablehlo.multiply %c, %invb : tensor<128x256xf32>
  %yg = stablehlo.multiply %y, %gb : tensor<128x256xf32>
  %r = stablehlo.add %yg, %bb : tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}

// gelu, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
func.func private @gelu(%x: tensor<128x1024xf32>) -> tensor<128x1024xf32> {
  %half = stablehlo.constant dense<0.5> : tensor<128x1024xf32>
  %one = stablehlo.constant dense<1.0> : tensor<128x1024xf32>
  %a = stablehlo.constant dense<0.044715> : tensor<128x1024xf32>
  %k = stablehlo.constant dense<0.7978845608> : tensor<128x1024xf32>
  %x2 = stablehlo.multiply %x, %x : tensor<128x1024xf32>
  %x3 = stablehlo.multiply %x2, %x : tensor<128x1024xf32>
  %ax3 = stablehlo.multiply %a, %x3 : tensor<128x1024xf32>
  %in = stablehlo.add %x, %ax3 : tensor<128x1024xf32>
  %kin = stablehlo.multiply %k, %in : tensor<128x1024xf32>
  %t = stablehlo.tanh %kin : tensor<128x1024xf32>
  %t1 = stablehlo.add %one, %t : tensor<128x1024xf32>
  %hx = stablehlo.multiply %half, %x : tensor<128x1024xf32>
  %r = stablehlo.multiply %hx, %t1 : tensor<128x1024xf32>
  return %r : tensor<128x1024xf32>
}
