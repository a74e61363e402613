// A cache a decode loop keeps: each call writes one row (twice the input) into the 4x8 global at row %i.
// IREE copies the old cache into a new buffer (a queue copy), writes the row in place there (a dispatch),
// and copies the result into the buffer the global then holds (a command-buffer copy).
util.global private mutable @cache = dense<0.0> : tensor<4x8xf32>
func.func @step(%row: tensor<1x8xf32>, %i: index) -> tensor<4x8xf32> {
  %c = util.global.load @cache : tensor<4x8xf32>
  %r = arith.addf %row, %row : tensor<1x8xf32>
  %u = tensor.insert_slice %r into %c[%i, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  util.global.store %u, @cache : tensor<4x8xf32>
  return %u : tensor<4x8xf32>
}
