"""The IR viewer colours a token the same wherever the viewport's right edge cuts it.

Walk (efficientvit_m0.mlir, Phases, vm phase at 1366x768): of the lines
``dense_resource<torch_tensor_..._torch.float32> : tensor<...>`` some were bold blue and some plain, by where
the view's edge fell: the painter tokenized only the visible columns, and a dotted name cut before its dot
(``torch_tensor_64_1_3_3_torc``) was no longer one token. At 1920x1080 the same lines were all coloured."""

from __future__ import annotations

from app.views.ir_mlir_syntax import tokenize
from app.views.ir_viewer import IrTextView

LINE = "    dense_resource<torch_tensor_64_1_3_3_torch.float32> : tensor<64x1x3x3xf32>,"


def kind_at(text: str, col: int, col0: int, ncols: int) -> int:
    lo, _seg, runs = IrTextView.line_runs(text, col0, ncols)
    return next(kind for start, stop, kind in runs if start <= col - lo < stop)


def test_a_token_cut_by_the_right_edge_keeps_its_colour():
    col = LINE.index("torch_tensor")
    [whole] = [kind for start, length, kind in tokenize(LINE) if start == col]
    for ncols in range(col + 1, len(LINE) + 1):  # every place the right edge can cut the line
        assert kind_at(LINE, col, 0, ncols) == whole, ncols
    # ... and the left edge too.
    for col0 in range(0, col + 10):
        assert kind_at(LINE, col + 10, col0, 40) == whole, col0


def test_the_runs_cover_the_line_in_order():
    lo, seg, runs = IrTextView.line_runs(LINE, 0, 30)
    assert lo == 0 and seg == LINE
    assert runs[0][0] == 0 and runs[-1][1] == len(seg)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
