// A JAX export as `jax.jit(predict).lower(...).as_text(debug_info=True)` writes it: StableHLO, every op
// located at its Python line and named by its path in the traced program (tests/test_by_source.py).
#loc1 = loc("/home/user/jaxmodel.py":10:0)
#loc2 = loc("/home/user/jaxmodel.py":11:0)
#loc3 = loc("/home/user/jaxmodel.py":12:0)
#loc4 = loc("/home/user/jaxmodel.py":13:0)
#loc5 = loc("/home/user/jaxmodel.py":20:0)
module @jit_predict attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x16xf32> {mhlo.layout_mode = "default"}, %arg1: tensor<16x32xf32> {mhlo.layout_mode = "default"}, %arg2: tensor<32xf32>) -> (tensor<4x32xf32> {jax.result_info = "[0]"}, tensor<4xf32> {jax.result_info = "[1]"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32> loc(#l0)
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<32xf32>) -> tensor<4x32xf32> loc(#l1)
    %2 = stablehlo.add %0, %1 : tensor<4x32xf32> loc(#l1)
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x32xf32>
    %4 = stablehlo.maximum %2, %3 : tensor<4x32xf32> loc(#l2)
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %5 = stablehlo.reduce(%4 init: %cst_0) applies stablehlo.maximum across dimensions = [1] : (tensor<4x32xf32>, tensor<f32>) -> tensor<4xf32> loc(#l3)
    %6 = stablehlo.broadcast_in_dim %5, dims = [0] : (tensor<4xf32>) -> tensor<4x32xf32>
    %7 = stablehlo.subtract %4, %6 : tensor<4x32xf32> loc(#l3)
    %8 = stablehlo.exponential %7 : tensor<4x32xf32> loc(#l3)
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.reduce(%8 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<4x32xf32>, tensor<f32>) -> tensor<4xf32> loc(#l3)
    %10 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<4xf32>) -> tensor<4x32xf32>
    %11 = stablehlo.divide %8, %10 : tensor<4x32xf32> loc(#l3)
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c5 = stablehlo.constant dense<5> : tensor<i32>
    %12:2 = stablehlo.while(%iterArg = %c0, %iterArg_2 = %5) : tensor<i32>, tensor<4xf32>
     cond {
      %13 = stablehlo.compare  LT, %iterArg, %c5,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %13 : tensor<i1>
    } do {
      %cst_3 = stablehlo.constant dense<5.000000e-01> : tensor<4xf32>
      %13 = stablehlo.multiply %iterArg_2, %cst_3 : tensor<4xf32> loc(#l4)
      %c1 = stablehlo.constant dense<1> : tensor<i32>
      %14 = stablehlo.add %iterArg, %c1 : tensor<i32>
      stablehlo.return %14, %13 : tensor<i32>, tensor<4xf32>
    } loc(#l4)
    return %11, %12#1 : tensor<4x32xf32>, tensor<4xf32>
  }
}
#l0 = loc("jit(predict)/jit(main)/dot_general"(#loc1))
#l1 = loc("jit(predict)/jit(main)/add"(#loc2))
#l2 = loc("jit(predict)/jit(main)/max"(#loc3))
#l3 = loc("jit(predict)/jit(main)/softmax"(#loc4))
#l4 = loc("jit(predict)/jit(main)/while"(#loc5))
