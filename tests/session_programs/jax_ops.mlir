// StableHLO as JAX writes it, ops with regions in the generic form ("stablehlo.sort"(...)): a padded conv
// (its padding a copy dispatch), a max-pool, sort, scatter-add, select on an i1 mask, a lax.scan loop.
module @jit_ops {
  func.func public @main(%x: tensor<1x8x8x3xf32>, %w: tensor<3x3x3x4xf32>, %v: tensor<16xf32>, %idx: tensor<4x1xi32>, %upd: tensor<4xf32>, %mask: tensor<16xi1>) -> (tensor<1x4x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<5x16xf32>) {
    %conv = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x8x8x4xf32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %pool = "stablehlo.reduce_window"(%conv, %ninf) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>} : (tensor<1x8x8x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
    %sorted = "stablehlo.sort"(%v) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = true} : (tensor<16xf32>) -> tensor<16xf32>
    %scat = "stablehlo.scatter"(%v, %idx, %upd) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<16xf32>, tensor<4x1xi32>, tensor<4xf32>) -> tensor<16xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<16xf32>
    %masked = stablehlo.select %mask, %v, %zero : tensor<16xi1>, tensor<16xf32>
    // lax.scan: 5 steps, each row = previous * 0.5 + v, written with dynamic_update_slice
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c5 = stablehlo.constant dense<5> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %half = stablehlo.constant dense<0.5> : tensor<16xf32>
    %acc0 = stablehlo.constant dense<0.0> : tensor<5x16xf32>
    %r:3 = stablehlo.while(%i = %c0, %carry = %v, %acc = %acc0) : tensor<i32>, tensor<16xf32>, tensor<5x16xf32>
     cond {
      %lt = stablehlo.compare LT, %i, %c5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %m = stablehlo.multiply %carry, %half : tensor<16xf32>
      %n = stablehlo.add %m, %v : tensor<16xf32>
      %row = stablehlo.reshape %n : (tensor<16xf32>) -> tensor<1x16xf32>
      %z = stablehlo.constant dense<0> : tensor<i32>
      %acc2 = stablehlo.dynamic_update_slice %acc, %row, %i, %z : (tensor<5x16xf32>, tensor<1x16xf32>, tensor<i32>, tensor<i32>) -> tensor<5x16xf32>
      %i2 = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %i2, %n, %acc2 : tensor<i32>, tensor<16xf32>, tensor<5x16xf32>
    }
    return %pool, %sorted, %scat, %masked, %r#2 : tensor<1x4x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<5x16xf32>
  }
}
