// vm.check.* pseudo-ops for tests/vm/test_vm_errors.py. iree-as-module cannot
// assemble them: iree-compile --compile-mode=vm expands each into a compare,
// a cond_br and a vm.fail with FAILED_PRECONDITION (9) and the message.
vm.module @checks {
  vm.export @check_eq_i32
  vm.func @check_eq_i32(%a: i32, %b: i32) -> i32 {
    vm.check.eq %a, %b, "a == b" : i32
    vm.return %a : i32
  }
  vm.export @check_ne_i64
  vm.func @check_ne_i64(%a: i64, %b: i64) -> i64 {
    vm.check.ne %a, %b, "a != b" : i64
    vm.return %a : i64
  }
  vm.export @check_nz_i32
  vm.func @check_nz_i32(%a: i32) -> i32 {
    vm.check.nz %a, "a is nonzero" : i32
    vm.return %a : i32
  }
  vm.export @check_eq_f32
  vm.func @check_eq_f32(%a: f32, %b: f32) -> f32 {
    vm.check.eq %a, %b, "f32 equal" : f32
    vm.return %a : f32
  }
  vm.export @check_nearly_eq_f32
  vm.func @check_nearly_eq_f32(%a: f32, %b: f32) -> f32 {
    vm.check.nearly_eq %a, %b, "nearly" : f32
    vm.return %a : f32
  }
  vm.export @check_nz_ref
  vm.func @check_nz_ref(%n: i32) -> i32 {
    %null = vm.const.ref.zero : !vm.buffer
    %c8 = vm.const.i32 8
    %n64 = vm.ext.i32.i64.s %n : i32 -> i64
    %b = vm.buffer.alloc %n64, %c8 : !vm.buffer
    %r = vm.select.ref %n, %b, %null : !vm.buffer
    vm.check.nz %r, "ref is not null" : !vm.buffer
    vm.return %n : i32
  }
  vm.export @check_eq_ref
  vm.func @check_eq_ref(%n: i32) -> i32 {
    %c8 = vm.const.i32 8
    %c4 = vm.const.i64 4
    %a = vm.buffer.alloc %c4, %c8 : !vm.buffer
    %b = vm.buffer.alloc %c4, %c8 : !vm.buffer
    %r = vm.select.ref %n, %a, %b : !vm.buffer
    vm.check.eq %r, %a, "same buffer" : !vm.buffer
    vm.return %n : i32
  }
}
