vm.module @module {
  vm.rodata private @table dense<[1.5, -2.25, 3.0, 0.125]> : tensor<4xf32>
  vm.export @ops
  vm.func @ops(%local: !vm.buffer, %consts: !vm.buffer, %bindings: !vm.list<!vm.buffer>,
               %wx: i32, %wy: i32, %wz: i32, %sx: i32, %sy: i32, %sz: i32,
               %cx: i32, %cy: i32, %cz: i32) {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %c2 = vm.const.i32 2
    %z = vm.const.i64 0
    %one = vm.const.i64 1
    %four = vm.const.i64 4
    %sixteen = vm.const.i64 16
    %in = vm.list.get.ref %bindings, %c0 : (!vm.list<!vm.buffer>, i32) -> !vm.buffer
    %iin = vm.list.get.ref %bindings, %c1 : (!vm.list<!vm.buffer>, i32) -> !vm.buffer
    %out = vm.list.get.ref %bindings, %c2 : (!vm.list<!vm.buffer>, i32) -> !vm.buffer
    %table = vm.const.ref.rodata @table : !vm.buffer
    %scratch = vm.buffer.alloc %sixteen, %c1 : !vm.buffer
    %n32 = vm.buffer.load.i32 %consts[%z] : !vm.buffer -> i32
    %n = vm.ext.i32.i64.u %n32 : i32 -> i64
    %wx64 = vm.ext.i32.i64.u %wx : i32 -> i64
    %base = vm.mul.i64 %wx64, %n : i64
    vm.br ^loop(%z : i64)
  ^loop(%k: i64):
    %more = vm.cmp.lt.i64.s %k, %n : i64
    vm.cond_br %more, ^body, ^done
  ^body:
    %e = vm.add.i64 %base, %k : i64
    %x = vm.buffer.load.f32 %in[%e] : !vm.buffer -> f32
    %a = vm.buffer.load.i32 %iin[%e] : !vm.buffer -> i32
    %t4 = vm.rem.i64.u %k, %four : i64
    %tv = vm.buffer.load.f32 %table[%t4] : !vm.buffer -> f32
    %p = vm.mul.f32 %x, %tv : f32
    %q = vm.fma.f32 %x, %tv, %p : f32
    %ex = vm.exp.f32 %x : f32
    %th = vm.tanh.f32 %q : f32
    %mn = vm.min.f32 %ex, %th : f32
    %mx = vm.max.f32 %x, %tv : f32
    %dv = vm.div.f32 %p, %x : f32
    %sq = vm.rsqrt.f32 %x : f32
    %nan = vm.cmp.nan.f32 %sq : f32
    %lt = vm.cmp.lt.f32.u %x, %tv : f32
    %sel = vm.select.f32 %lt, %mn, %mx : f32
    %rnd = vm.cast.f32.si32 %q : f32 -> i32
    %ab = vm.abs.f32 %x : f32
    %ng = vm.neg.f32 %x : f32
    %fl = vm.floor.f32 %q : f32
    %ci = vm.cast.si32.f32 %a : i32 -> f32
    %ds = vm.div.i32.s %a, %c2 : i32
    %rs = vm.rem.i32.s %a, %c2 : i32
    %m1 = vm.const.i32 -1
    %dm = vm.div.i32.s %a, %m1 : i32
    %sh = vm.shr.i32.s %a, %c1 : i32
    %su = vm.shr.i32.u %a, %c1 : i32
    %sl = vm.shl.i32 %a, %c2 : i32
    %xo = vm.xor.i32 %a, %rnd : i32
    %mi = vm.min.i32.s %a, %ds : i32
    %mu = vm.max.i32.u %a, %rs : i32
    %a64 = vm.ext.i32.i64.s %a : i32 -> i64
    %w64 = vm.mul.i64 %a64, %a64 : i64
    %tr = vm.trunc.i64.i32 %w64 : i64 -> i32
    %i8 = vm.ext.i8.i32.s %a : i32 -> i32
    %slot = vm.rem.i64.u %k, %four : i64
    vm.buffer.store.f32 %x, %scratch[%slot] : f32 -> !vm.buffer
    %back = vm.buffer.load.f32 %scratch[%slot] : !vm.buffer -> f32
    %o = vm.mul.i64 %e, %sixteen : i64
    %o1 = vm.add.i64 %o, %one : i64
    %o2 = vm.add.i64 %o1, %one : i64
    %o3 = vm.add.i64 %o2, %one : i64
    %o4 = vm.add.i64 %o3, %one : i64
    %o5 = vm.add.i64 %o4, %one : i64
    %o6 = vm.add.i64 %o5, %one : i64
    %o7 = vm.add.i64 %o6, %one : i64
    %o8 = vm.add.i64 %o7, %one : i64
    %o9 = vm.add.i64 %o8, %one : i64
    %o10 = vm.add.i64 %o9, %one : i64
    %o11 = vm.add.i64 %o10, %one : i64
    %o12 = vm.add.i64 %o11, %one : i64
    %o13 = vm.add.i64 %o12, %one : i64
    %o14 = vm.add.i64 %o13, %one : i64
    %o15 = vm.add.i64 %o14, %one : i64
    vm.buffer.store.f32 %sel, %out[%o] : f32 -> !vm.buffer
    vm.buffer.store.f32 %dv, %out[%o1] : f32 -> !vm.buffer
    vm.buffer.store.f32 %sq, %out[%o2] : f32 -> !vm.buffer
    vm.buffer.store.i32 %nan, %out[%o3] : i32 -> !vm.buffer
    vm.buffer.store.i32 %rnd, %out[%o4] : i32 -> !vm.buffer
    vm.buffer.store.f32 %ab, %out[%o5] : f32 -> !vm.buffer
    vm.buffer.store.f32 %ng, %out[%o6] : f32 -> !vm.buffer
    vm.buffer.store.f32 %fl, %out[%o7] : f32 -> !vm.buffer
    vm.buffer.store.f32 %ci, %out[%o8] : f32 -> !vm.buffer
    vm.buffer.store.i32 %ds, %out[%o9] : i32 -> !vm.buffer
    vm.buffer.store.i32 %rs, %out[%o10] : i32 -> !vm.buffer
    vm.buffer.store.i32 %dm, %out[%o11] : i32 -> !vm.buffer
    %acc1 = vm.add.i32 %sh, %su : i32
    %acc2 = vm.add.i32 %acc1, %sl : i32
    %acc3 = vm.add.i32 %acc2, %xo : i32
    vm.buffer.store.i32 %acc3, %out[%o12] : i32 -> !vm.buffer
    %acc4 = vm.add.i32 %mi, %mu : i32
    vm.buffer.store.i32 %acc4, %out[%o13] : i32 -> !vm.buffer
    %acc5 = vm.add.i32 %tr, %i8 : i32
    vm.buffer.store.i32 %acc5, %out[%o14] : i32 -> !vm.buffer
    vm.buffer.store.f32 %back, %out[%o15] : f32 -> !vm.buffer
    %k2 = vm.add.i64 %k, %one : i64
    vm.br ^loop(%k2 : i64)
  ^done:
    vm.return
  }
}
