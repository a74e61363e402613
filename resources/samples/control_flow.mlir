// Host-side control flow: a loop whose trip count is a runtime scalar, and a branch on a scalar.
func.func @repeat_double(%x: tensor<4xf32>, %n: i32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r:2 = scf.while (%i = %c0, %v = %x) : (i32, tensor<4xf32>) -> (i32, tensor<4xf32>) {
    %cond = arith.cmpi slt, %i, %n : i32
    scf.condition(%cond) %i, %v : i32, tensor<4xf32>
  } do {
  ^bb0(%i: i32, %v: tensor<4xf32>):
    %d = arith.addf %v, %v : tensor<4xf32>
    %next = arith.addi %i, %c1 : i32
    scf.yield %next, %d : i32, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}

func.func @pick(%flag: i32, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : i32
  %p = arith.cmpi ne, %flag, %c0 : i32
  %r = scf.if %p -> tensor<4xf32> {
    %s = arith.addf %a, %b : tensor<4xf32>
    scf.yield %s : tensor<4xf32>
  } else {
    %d = arith.subf %a, %b : tensor<4xf32>
    scf.yield %d : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

func.func @collatz_steps(%start: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %r:2 = scf.while (%n = %start, %steps = %c0) : (i32, i32) -> (i32, i32) {
    %more = arith.cmpi sgt, %n, %c1 : i32
    scf.condition(%more) %n, %steps : i32, i32
  } do {
  ^bb0(%n: i32, %steps: i32):
    %rem = arith.remsi %n, %c2 : i32
    %odd = arith.cmpi ne, %rem, %c0 : i32
    %half = arith.divsi %n, %c2 : i32
    %t = arith.muli %n, %c3 : i32
    %t1 = arith.addi %t, %c1 : i32
    %next = arith.select %odd, %t1, %half : i32
    %s1 = arith.addi %steps, %c1 : i32
    scf.yield %next, %s1 : i32, i32
  }
  return %r#1 : i32
}
