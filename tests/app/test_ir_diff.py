"""The side-by-side diff on two real phases, checked against difflib run independently."""

from __future__ import annotations

import difflib
import subprocess

import pytest

from app.views.ir_diff import CHANGED, FILLER, IrDiffView, diff_texts
from engine.compiler.job import iree_compile_path
from engine.samples import sample_path


@pytest.fixture(scope="module")
def phase_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("phases")
    subprocess.run(
        [iree_compile_path(), str(sample_path("mlp")), "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
         f"--dump-compilation-phases-to={out}", "-o", str(out / "out.vmfb")],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def _difflib_changed(a: list[str], b: list[str]) -> tuple[set[int], set[int]]:
    left, right = set(), set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            left.update(range(i1, i2))
            right.update(range(j1, j2))
    return left, right


@pytest.mark.parametrize("pair", [("5.dispatch-creation", "6.flow"), ("6.flow", "7.stream")])
def test_diff_marks_the_lines_that_differ(qtbot, phase_dir, pair):
    a = (phase_dir / f"mlp.{pair[0]}.mlir").read_text()
    b = (phase_dir / f"mlp.{pair[1]}.mlir").read_text()
    la, lb = a.splitlines(), b.splitlines()
    want_left, want_right = _difflib_changed(la, lb)
    assert want_left and want_right  # the phases do differ
    view = IrDiffView()
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.set_texts(a, b, pair[0], pair[1])
    d = view.diff
    assert d.changed_lines("left") == want_left
    assert d.changed_lines("right") == want_right
    # both sides have the same number of rows, and each non-filler row shows its original line
    assert d.left.line_count == d.right.line_count
    for row in range(d.left.line_count):
        if d.left_kind[row] != FILLER:
            assert d.left.line(row) == la[d.left_numbers[row] - 1]
        if d.right_kind[row] != FILLER:
            assert d.right.line(row) == lb[d.right_numbers[row] - 1]
    # next/previous change move both sides to the change's rows
    view.show()
    qtbot.waitExposed(view)
    view.next_change()
    first = d.changes[0][0]
    assert view.left.cursor_position()[0] == first == view.right.cursor_position()[0]
    view.previous_change()
    assert view.current_change() == len(d.changes) - 1
    # scrolling one side scrolls the other
    view.left.verticalScrollBar().setValue(3)
    assert view.right.verticalScrollBar().value() == 3


def test_identical_and_big_inputs():
    same = diff_texts("a\nb\n", "a\nb\n")
    assert same.changes == []
    # a big text with one change in the middle: the common head and tail are trimmed by hash
    lines = [f"%{i} = arith.constant {i} : i32" for i in range(300_000)]
    other = list(lines)
    other[150_000] = "%changed = arith.constant 0 : i32"
    d = diff_texts("\n".join(lines), "\n".join(other))
    assert d.changes == [(150_000, 150_001)]
    assert d.left_kind[150_000] == CHANGED
    # beyond the limit the middle is one block, said so
    d2 = diff_texts("\n".join(lines), "\n".join(reversed(lines)), max_lines=1000)
    assert d2.truncated and len(d2.changes) == 1
