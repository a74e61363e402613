"""A program whose initializer runs a dispatch: int4 weights dequantized to f32, as IREE's const-expr hoisting
leaves an int4 model (weights by a formula; the expected values computed here with numpy)."""

from __future__ import annotations

import numpy as np

K, N = 64, 16
WEIGHTS = (np.add.outer(np.arange(K) * 5, np.arange(N) * 3) % 16) - 8  # int4's range, -8..7
SCALES = (np.arange(N) % 4 + 1) * 0.25
DEQUANTIZED = (WEIGHTS * SCALES).astype(np.float32)


def dequantizing_program() -> str:
    """The program's MLIR: ``main(x: 2x64xf32) = x @ dequantize(weights)``."""
    rows = ", ".join("[" + ", ".join(map(str, r)) + "]" for r in WEIGHTS)
    return f"""
util.global private @weights = dense<[{rows}]> : tensor<{K}x{N}xi4>
util.global private @scales = dense<[{", ".join(map(str, SCALES))}]> : tensor<{N}xf32>
func.func @main(%x: tensor<2x{K}xf32>) -> tensor<2x{N}xf32> {{
  %w = util.global.load @weights : tensor<{K}x{N}xi4>
  %s = util.global.load @scales : tensor<{N}xf32>
  %init = tensor.empty() : tensor<{K}x{N}xf32>
  %dequantized = linalg.generic {{
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}}
      ins(%w, %s : tensor<{K}x{N}xi4>, tensor<{N}xf32>) outs(%init : tensor<{K}x{N}xf32>) {{
  ^bb0(%q: i4, %scale: f32, %out: f32):
    %wide = arith.extsi %q : i4 to i32
    %f = arith.sitofp %wide : i32 to f32
    %v = arith.mulf %f, %scale : f32
    linalg.yield %v : f32
  }} -> tensor<{K}x{N}xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x{N}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x{N}xf32>) -> tensor<2x{N}xf32>
  %y = linalg.matmul ins(%x, %dequantized : tensor<2x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%acc : tensor<2x{N}xf32>) -> tensor<2x{N}xf32>
  return %y : tensor<2x{N}xf32>
}}
"""
