// A counting loop in the VM dialect (cmp, cond_br, add, add, br per iteration): loop(n) sums 0..n-1.
// Compiled with --compile-from=vm; tests pause it mid-run, benchmarks/vm_speed.py times it.
vm.module @spin {
  vm.export @loop
  vm.func @loop(%n: i32) -> i32 {
    %c0 = vm.const.i32 0
    %c1 = vm.const.i32 1
    vm.br ^bb1(%c0, %c0 : i32, i32)
  ^bb1(%i: i32, %acc: i32):
    %more = vm.cmp.lt.i32.s %i, %n : i32
    vm.cond_br %more, ^bb2, ^bb3(%acc : i32)
  ^bb2:
    %acc2 = vm.add.i32 %acc, %i : i32
    %i2 = vm.add.i32 %i, %c1 : i32
    vm.br ^bb1(%i2, %acc2 : i32, i32)
  ^bb3(%res: i32):
    vm.return %res : i32
  }
}
