// Refs for tests/vm/test_refs.py, in the VM dialect (compiled with
// `iree-compile --compile-mode=vm`, because iree-as-module 3.13 cannot assemble
// vm.switch.ref). Buffers are told apart by their lengths; a null ref reports
// length -1.
vm.module @refs {
  vm.func private @len(%b: !vm.buffer) -> i64 {
    %nz = vm.cmp.nz.ref %b : !vm.buffer
    vm.cond_br %nz, ^bb1, ^bb2
  ^bb1:
    %n = vm.buffer.length %b : !vm.buffer -> i64
    vm.return %n : i64
  ^bb2:
    %m1 = vm.const.i64 -1
    vm.return %m1 : i64
  }

  vm.func private @make(%n: i64) -> !vm.buffer {
    %c8 = vm.const.i32 8
    %b = vm.buffer.alloc %n, %c8 : !vm.buffer
    vm.return %b : !vm.buffer
  }

  vm.export @select_ref
  vm.func @select_ref(%cond: i32, %null_true: i32) -> i64 {
    %c10 = vm.const.i64 10
    %c20 = vm.const.i64 20
    %a = vm.call @make(%c10) : (i64) -> !vm.buffer
    %b = vm.call @make(%c20) : (i64) -> !vm.buffer
    %null = vm.const.ref.zero : !vm.buffer
    %t = vm.select.ref %null_true, %null, %a : !vm.buffer
    %r = vm.select.ref %cond, %t, %b : !vm.buffer
    %n = vm.call @len(%r) : (!vm.buffer) -> i64
    vm.return %n : i64
  }

  vm.export @switch_ref
  vm.func @switch_ref(%index: i32) -> i64 {
    %c1 = vm.const.i64 1
    %c2 = vm.const.i64 2
    %c3 = vm.const.i64 3
    %c9 = vm.const.i64 9
    %a = vm.call @make(%c1) : (i64) -> !vm.buffer
    %b = vm.call @make(%c2) : (i64) -> !vm.buffer
    %c = vm.call @make(%c3) : (i64) -> !vm.buffer
    %d = vm.call @make(%c9) : (i64) -> !vm.buffer
    %null = vm.const.ref.zero : !vm.buffer
    %r = vm.switch.ref %index[%a, %b, %null, %c] else %d : !vm.buffer
    %n = vm.call @len(%r) : (!vm.buffer) -> i64
    vm.return %n : i64
  }

  // Equality of refs: the same object, two distinct objects, nulls.
  vm.export @compare
  vm.func @compare(%which: i32) -> (i32, i32, i32, i32) {
    %c4 = vm.const.i64 4
    %a = vm.call @make(%c4) : (i64) -> !vm.buffer
    %b = vm.call @make(%c4) : (i64) -> !vm.buffer
    %null = vm.const.ref.zero : !vm.buffer
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %x = vm.switch.ref %which[%a, %b, %null] else %a : !vm.buffer
    %eq_a = vm.cmp.eq.ref %x, %a : !vm.buffer
    %ne_b = vm.cmp.ne.ref %x, %b : !vm.buffer
    %eq_null = vm.cmp.eq.ref %x, %null : !vm.buffer
    %nz = vm.cmp.nz.ref %x : !vm.buffer
    vm.return %eq_a, %ne_b, %eq_null, %nz : i32, i32, i32, i32
  }

  // A ref survives being passed to calls and stored in a list.
  vm.export @list_of_refs
  vm.func @list_of_refs(%n: i32) -> (i32, i64, i32) {
    %c2 = vm.const.i32 2
    %list = vm.list.alloc %c2 : (i32) -> !vm.list<?>
    vm.list.resize %list, %c2 : (!vm.list<?>, i32)
    %n64 = vm.ext.i32.i64.u %n : i32 -> i64
    %b = vm.call @make(%n64) : (i64) -> !vm.buffer
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    vm.list.set.ref %list, %c1, %b : (!vm.list<?>, i32, !vm.buffer)
    %got = vm.list.get.ref %list, %c1 : (!vm.list<?>, i32) -> !vm.buffer
    %same = vm.cmp.eq.ref %got, %b : !vm.buffer
    %len = vm.call @len(%got) : (!vm.buffer) -> i64
    %empty = vm.list.get.ref %list, %c0 : (!vm.list<?>, i32) -> !vm.buffer
    %is_null = vm.cmp.nz.ref %empty : !vm.buffer
    vm.return %same, %len, %is_null : i32, i64, i32
  }

  // i32 list: set/get/size with an index from the caller.
  vm.export @list_i32
  vm.func @list_i32(%size: i32, %index: i32, %value: i32) -> (i32, i32) {
    %c1 = vm.const.i32 1
    %list = vm.list.alloc %c1 : (i32) -> !vm.list<i32>
    vm.list.resize %list, %size : (!vm.list<i32>, i32)
    vm.list.set.i32 %list, %index, %value : (!vm.list<i32>, i32, i32)
    %got = vm.list.get.i32 %list, %index : (!vm.list<i32>, i32) -> i32
    %n = vm.list.size %list : (!vm.list<i32>) -> i32
    vm.return %got, %n : i32, i32
  }

  // Buffer stores and loads at an element offset from the caller.
  vm.export @buffer_io
  vm.func @buffer_io(%length: i64, %offset: i64, %value: i32) -> (i32, i32, i32) {
    %b = vm.call @make(%length) : (i64) -> !vm.buffer
    vm.buffer.store.i32 %value, %b[%offset] : i32 -> !vm.buffer
    %w = vm.buffer.load.i32 %b[%offset] : !vm.buffer -> i32
    %lo = vm.buffer.load.i8.s %b[%offset] : !vm.buffer -> i32
    %hi = vm.buffer.load.i16.u %b[%offset] : !vm.buffer -> i32
    vm.return %w, %lo, %hi : i32, i32, i32
  }

  // vm.cast.any.ref: a buffer through !vm.ref<?> back to !vm.buffer (ok) and,
  // when %as_list is set, to !vm.list<i32> (wrong type).
  vm.export @cast_any
  vm.func @cast_any(%as_list: i32) -> i64 {
    %c5 = vm.const.i64 5
    %b = vm.call @make(%c5) : (i64) -> !vm.buffer
    %any = vm.cast.ref.any %b : !vm.buffer -> !vm.ref<?>
    vm.cond_br %as_list, ^bb1, ^bb2
  ^bb1:
    %l = vm.cast.any.ref %any : !vm.ref<?> -> !vm.list<i32>
    %s = vm.list.size %l : (!vm.list<i32>) -> i32
    %s64 = vm.ext.i32.i64.s %s : i32 -> i64
    vm.return %s64 : i64
  ^bb2:
    %back = vm.cast.any.ref %any : !vm.ref<?> -> !vm.buffer
    %n = vm.call @len(%back) : (!vm.buffer) -> i64
    vm.return %n : i64
  }
}
