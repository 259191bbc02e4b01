// CORPUS-FLAGS: --iree-input-demote-f64-to-f32=false
// Floating-point scalar programs on f32 and f64 (f64 demotion is disabled so
// the f64 VM extension is used): arithmetic, math functions, comparisons,
// min/max, int<->float casts and a Newton iteration loop.

func.func @float_ops_f32(%a: f32, %b: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
  %add = arith.addf %a, %b : f32
  %sub = arith.subf %a, %b : f32
  %mul = arith.mulf %a, %b : f32
  %div = arith.divf %a, %b : f32
  %rem = arith.remf %a, %b : f32
  %min = arith.minimumf %a, %b : f32
  %max = arith.maximumf %a, %b : f32
  %neg = arith.negf %a : f32
  return %add, %sub, %mul, %div, %rem, %min, %max, %neg : f32, f32, f32, f32, f32, f32, f32, f32
}

func.func @float_ops_f64(%a: f64, %b: f64) -> (f64, f64, f64, f64, f64, f64) {
  %add = arith.addf %a, %b : f64
  %sub = arith.subf %a, %b : f64
  %mul = arith.mulf %a, %b : f64
  %div = arith.divf %a, %b : f64
  %min = arith.minimumf %a, %b : f64
  %max = arith.maximumf %a, %b : f64
  return %add, %sub, %mul, %div, %min, %max : f64, f64, f64, f64, f64, f64
}

func.func @math_f32(%x: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
  %abs = math.absf %x : f32
  %sqrt = math.sqrt %abs : f32
  %exp = math.exp %x : f32
  %log = math.log %abs : f32
  %floor = math.floor %x : f32
  %ceil = math.ceil %x : f32
  %tanh = math.tanh %x : f32
  %sin = math.sin %x : f32
  return %abs, %sqrt, %exp, %log, %floor, %ceil, %tanh, %sin : f32, f32, f32, f32, f32, f32, f32, f32
}

func.func @math_f64(%x: f64) -> (f64, f64, f64, f64) {
  %abs = math.absf %x : f64
  %sqrt = math.sqrt %abs : f64
  %exp = math.exp %x : f64
  %pow = math.powf %abs, %x : f64
  return %abs, %sqrt, %exp, %pow : f64, f64, f64, f64
}

// Ordered and unordered float predicates packed into a bit mask.
func.func @compare_mask_f32(%a: f32, %b: f32) -> i32 {
  %oeq = arith.cmpf oeq, %a, %b : f32
  %olt = arith.cmpf olt, %a, %b : f32
  %ole = arith.cmpf ole, %a, %b : f32
  %ogt = arith.cmpf ogt, %a, %b : f32
  %une = arith.cmpf une, %a, %b : f32
  %uno = arith.cmpf uno, %a, %b : f32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c5 = arith.constant 5 : i32
  %b0 = arith.extui %oeq : i1 to i32
  %b1 = arith.extui %olt : i1 to i32
  %b2 = arith.extui %ole : i1 to i32
  %b3 = arith.extui %ogt : i1 to i32
  %b4 = arith.extui %une : i1 to i32
  %b5 = arith.extui %uno : i1 to i32
  %s1 = arith.shli %b1, %c1 : i32
  %s2 = arith.shli %b2, %c2 : i32
  %s3 = arith.shli %b3, %c3 : i32
  %s4 = arith.shli %b4, %c4 : i32
  %s5 = arith.shli %b5, %c5 : i32
  %m0 = arith.ori %b0, %s1 : i32
  %m1 = arith.ori %m0, %s2 : i32
  %m2 = arith.ori %m1, %s3 : i32
  %m3 = arith.ori %m2, %s4 : i32
  %m4 = arith.ori %m3, %s5 : i32
  return %m4 : i32
}

// int <-> float conversions. In iree-compile 3.13.0 host-side f64 casts
// (arith.truncf f64->f32, arith.sitofp i32->f64, arith.fptosi f64->i64,
// arith.fptoui f64->i32) fail to legalize to VM; only extf f32->f64 works.
// The vmasm corpus covers the f64 cast instructions instead.
func.func @float_casts(%i: i32, %f: f32, %d: f64) -> (f32, f32, i32, i32, f64) {
  %sitofp = arith.sitofp %i : i32 to f32
  %uitofp = arith.uitofp %i : i32 to f32
  %fptosi = arith.fptosi %f : f32 to i32
  %fptoui = arith.fptoui %f : f32 to i32
  %ext = arith.extf %f : f32 to f64
  return %sitofp, %uitofp, %fptosi, %fptoui, %ext : f32, f32, i32, i32, f64
}

// Square root by Newton's method: fixed iteration count, f64 loop carry.
func.func @newton_sqrt_f64(%x: f64, %iters: i32) -> f64 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %half = arith.constant 0.5 : f64
  %r = scf.for %i = %c0 to %iters step %c1 iter_args(%g = %x) -> (f64) : i32 {
    %q = arith.divf %x, %g : f64
    %s = arith.addf %g, %q : f64
    %n = arith.mulf %s, %half : f64
    scf.yield %n : f64
  }
  return %r : f64
}

// Relu-like select on f32 plus a float condition driving scf.if.
func.func @select_f32(%x: f32, %y: f32) -> (f32, f32) {
  %zero = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %x, %zero : f32
  %relu = arith.select %pos, %x, %zero : f32
  %bigger = arith.cmpf oge, %x, %y : f32
  %r = scf.if %bigger -> f32 {
    %d = arith.subf %x, %y : f32
    scf.yield %d : f32
  } else {
    %d = arith.subf %y, %x : f32
    scf.yield %d : f32
  }
  return %relu, %r : f32, f32
}
