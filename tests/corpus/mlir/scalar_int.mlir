// Integer scalar programs: arithmetic, division/remainder, shifts, bitwise,
// comparisons, min/max, select and integer casts on i32/i64 values. All of it
// runs as host VM code (no dispatches).

// Thirteen results: + - * /s %s /u %u << >>s >>u & | ^ of two i32 values.
func.func @int_ops_i32(%a: i32, %b: i32) -> (i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) {
  %add = arith.addi %a, %b : i32
  %sub = arith.subi %a, %b : i32
  %mul = arith.muli %a, %b : i32
  %divs = arith.divsi %a, %b : i32
  %rems = arith.remsi %a, %b : i32
  %divu = arith.divui %a, %b : i32
  %remu = arith.remui %a, %b : i32
  %c31 = arith.constant 31 : i32
  %sh = arith.andi %b, %c31 : i32
  %shl = arith.shli %a, %sh : i32
  %shrs = arith.shrsi %a, %sh : i32
  %shru = arith.shrui %a, %sh : i32
  %and = arith.andi %a, %b : i32
  %or = arith.ori %a, %b : i32
  %xor = arith.xori %a, %b : i32
  return %add, %sub, %mul, %divs, %rems, %divu, %remu, %shl, %shrs, %shru, %and, %or, %xor
      : i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32
}

func.func @int_ops_i64(%a: i64, %b: i64) -> (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) {
  %add = arith.addi %a, %b : i64
  %sub = arith.subi %a, %b : i64
  %mul = arith.muli %a, %b : i64
  %divs = arith.divsi %a, %b : i64
  %rems = arith.remsi %a, %b : i64
  %divu = arith.divui %a, %b : i64
  %remu = arith.remui %a, %b : i64
  %c63 = arith.constant 63 : i64
  %sh = arith.andi %b, %c63 : i64
  %shl = arith.shli %a, %sh : i64
  %shrs = arith.shrsi %a, %sh : i64
  %xor = arith.xori %a, %b : i64
  return %add, %sub, %mul, %divs, %rems, %divu, %remu, %shl, %shrs, %xor
      : i64, i64, i64, i64, i64, i64, i64, i64, i64, i64
}

// Signed and unsigned min/max plus floor/ceil division (which lower to
// compare-and-select sequences).
func.func @min_max_i32(%a: i32, %b: i32) -> (i32, i32, i32, i32, i32, i32) {
  %mins = arith.minsi %a, %b : i32
  %maxs = arith.maxsi %a, %b : i32
  %minu = arith.minui %a, %b : i32
  %maxu = arith.maxui %a, %b : i32
  %fdiv = arith.floordivsi %a, %b : i32
  %cdiv = arith.ceildivsi %a, %b : i32
  return %mins, %maxs, %minu, %maxu, %fdiv, %cdiv : i32, i32, i32, i32, i32, i32
}

// Every integer predicate packed into one bit mask (bit k = predicate k).
func.func @compare_mask_i64(%a: i64, %b: i64) -> i32 {
  %eq = arith.cmpi eq, %a, %b : i64
  %ne = arith.cmpi ne, %a, %b : i64
  %slt = arith.cmpi slt, %a, %b : i64
  %sle = arith.cmpi sle, %a, %b : i64
  %sgt = arith.cmpi sgt, %a, %b : i64
  %sge = arith.cmpi sge, %a, %b : i64
  %ult = arith.cmpi ult, %a, %b : i64
  %ule = arith.cmpi ule, %a, %b : i64
  %ugt = arith.cmpi ugt, %a, %b : i64
  %uge = arith.cmpi uge, %a, %b : i64
  %bits = arith.constant 0 : i32
  %b0 = arith.extui %eq : i1 to i32
  %b1 = arith.extui %ne : i1 to i32
  %b2 = arith.extui %slt : i1 to i32
  %b3 = arith.extui %sle : i1 to i32
  %b4 = arith.extui %sgt : i1 to i32
  %b5 = arith.extui %sge : i1 to i32
  %b6 = arith.extui %ult : i1 to i32
  %b7 = arith.extui %ule : i1 to i32
  %b8 = arith.extui %ugt : i1 to i32
  %b9 = arith.extui %uge : i1 to i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c5 = arith.constant 5 : i32
  %c6 = arith.constant 6 : i32
  %c7 = arith.constant 7 : i32
  %c8 = arith.constant 8 : i32
  %c9 = arith.constant 9 : i32
  %s1 = arith.shli %b1, %c1 : i32
  %s2 = arith.shli %b2, %c2 : i32
  %s3 = arith.shli %b3, %c3 : i32
  %s4 = arith.shli %b4, %c4 : i32
  %s5 = arith.shli %b5, %c5 : i32
  %s6 = arith.shli %b6, %c6 : i32
  %s7 = arith.shli %b7, %c7 : i32
  %s8 = arith.shli %b8, %c8 : i32
  %s9 = arith.shli %b9, %c9 : i32
  %m0 = arith.ori %b0, %s1 : i32
  %m1 = arith.ori %m0, %s2 : i32
  %m2 = arith.ori %m1, %s3 : i32
  %m3 = arith.ori %m2, %s4 : i32
  %m4 = arith.ori %m3, %s5 : i32
  %m5 = arith.ori %m4, %s6 : i32
  %m6 = arith.ori %m5, %s7 : i32
  %m7 = arith.ori %m6, %s8 : i32
  %m8 = arith.ori %m7, %s9 : i32
  return %m8 : i32
}

// select on a computed condition: returns a if flag is non-zero, else b.
func.func @select_i32(%flag: i32, %a: i32, %b: i32) -> i32 {
  %zero = arith.constant 0 : i32
  %c = arith.cmpi ne, %flag, %zero : i32
  %r = arith.select %c, %a, %b : i32
  return %r : i32
}

// Integer casts: sign/zero extension from i32, truncation to i8/i16 and back.
func.func @int_casts(%a: i32) -> (i64, i64, i32, i32, i32, i32) {
  %sext = arith.extsi %a : i32 to i64
  %zext = arith.extui %a : i32 to i64
  %t8 = arith.trunci %a : i32 to i8
  %t16 = arith.trunci %a : i32 to i16
  %s8 = arith.extsi %t8 : i8 to i32
  %u8 = arith.extui %t8 : i8 to i32
  %s16 = arith.extsi %t16 : i16 to i32
  %u16 = arith.extui %t16 : i16 to i32
  return %sext, %zext, %s8, %u8, %s16, %u16 : i64, i64, i32, i32, i32, i32
}

// i64 -> i32 truncation and a 64-bit value mixed with 32-bit arguments.
func.func @mixed_widths(%a: i32, %b: i64, %c: i32) -> (i64, i32) {
  %a64 = arith.extsi %a : i32 to i64
  %c64 = arith.extui %c : i32 to i64
  %p = arith.muli %a64, %b : i64
  %s = arith.addi %p, %c64 : i64
  %t = arith.trunci %s : i64 to i32
  return %s, %t : i64, i32
}
