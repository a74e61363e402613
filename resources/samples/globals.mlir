// Mutable globals: a running total that every call adds to, and a call counter.
util.global private mutable @total = dense<0.0> : tensor<4xf32>
util.global private mutable @calls = 0 : i32

func.func @accumulate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = util.global.load @total : tensor<4xf32>
  %s = arith.addf %t, %x : tensor<4xf32>
  util.global.store %s, @total : tensor<4xf32>
  %c = util.global.load @calls : i32
  %one = arith.constant 1 : i32
  %c1 = arith.addi %c, %one : i32
  util.global.store %c1, @calls : i32
  return %s : tensor<4xf32>
}

func.func @call_count() -> i32 {
  %c = util.global.load @calls : i32
  return %c : i32
}
