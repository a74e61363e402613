// Straight-line blocks, a loop and a division that can trap, in the VM dialect (test_vm_fusion).
vm.module @fuse {
  vm.export @loop
  vm.func @loop(%n: i32) -> i32 {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    %c3 = vm.const.i32 3
    vm.br ^bb1(%c0, %c0 : i32, i32)
  ^bb1(%i: i32, %acc: i32):
    %more = vm.cmp.lt.i32.s %i, %n : i32
    vm.cond_br %more, ^bb2, ^bb3(%acc : i32)
  ^bb2:
    %t = vm.mul.i32 %i, %c3 : i32
    %u = vm.xor.i32 %t, %acc : i32
    %acc2 = vm.add.i32 %u, %i : i32
    %i2 = vm.add.i32 %i, %c1 : i32
    vm.br ^bb1(%i2, %acc2 : i32, i32)
  ^bb3(%res: i32):
    vm.return %res : i32
  }
  vm.export @divide
  vm.func @divide(%a: i32, %b: i32) -> i32 {
    %c1 = vm.const.i32 1
    %x = vm.add.i32 %a, %c1 : i32
    %y = vm.mul.i32 %x, %x : i32
    %q = vm.div.i32.s %y, %b : i32
    %r = vm.add.i32 %q, %c1 : i32
    vm.return %r : i32
  }
}
