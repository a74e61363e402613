"""The IR viewer on a real phase dump: search, folding, go to definition, highlighting, big files."""

from __future__ import annotations

import re
import subprocess

import pytest

from app.views.ir_document import IrDocument
from app.views.ir_mlir_syntax import ATTRIBUTE, KEYWORD, OP, SSA, SYMBOL, tokenize
from app.views.ir_viewer import IrViewer
from engine.compiler.job import iree_compile_path
from engine.samples import sample_path


@pytest.fixture(scope="module")
def phase_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("phases")
    subprocess.run(
        [iree_compile_path(), str(sample_path("matmul")), "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
         f"--dump-compilation-phases-to={out}", "-o", str(out / "out.vmfb")],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


@pytest.fixture
def viewer(qtbot, phase_dir):
    w = IrViewer()
    qtbot.addWidget(w)
    w.resize(900, 500)
    w.open_file(phase_dir / "matmul.12.vm.mlir")
    w.show()
    qtbot.waitExposed(w)
    return w


def test_lines_match_the_file(phase_dir):
    text = (phase_dir / "matmul.12.vm.mlir").read_text()
    doc = IrDocument.from_text(text)
    lines = text.splitlines()
    assert doc.line_count == len(lines)
    for i in (0, 5, len(lines) // 2, len(lines) - 1):
        assert doc.line(i) == lines[i]


def test_search_finds_a_known_op(viewer, phase_dir):
    lines = (phase_dir / "matmul.12.vm.mlir").read_text().splitlines()
    expected = [i for i, ln in enumerate(lines) if "vm.call.variadic" in ln]
    assert expected
    m = viewer.find_next("vm.call.variadic")
    assert m is not None and m.line == expected[0]
    assert lines[m.line][m.start : m.end] == "vm.call.variadic"
    assert viewer.view.cursor_position()[0] == expected[0]
    assert expected[0] in viewer.view.visible_lines().tolist()  # scrolled into view
    # next wraps around through every occurrence; previous goes back
    seen = [m.line]
    for _ in range(len(expected) - 1):
        seen.append(viewer.find_next().line)
    assert seen == expected
    assert viewer.find_next().line == expected[0]
    if len(expected) > 1:
        assert viewer.find_previous().line == expected[-1]
    assert viewer.find_next("no_such_op_anywhere") is None


def test_folding_hides_lines(viewer, phase_dir, qtbot):
    lines = (phase_dir / "matmul.12.vm.mlir").read_text().splitlines()
    # the first vm.func's body is a brace region; find its closing line independently
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("vm.func"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == " " * indent + "}")
    view = viewer.view
    assert view.document().fold_end_of(start) == end
    before = len(view._visible)
    view.toggle_fold(start)
    assert view.is_folded(start)
    assert view.is_line_visible(start)
    assert not any(view.is_line_visible(i) for i in range(start + 1, end + 1))
    assert view.is_line_visible(end + 1)
    assert len(view._visible) == before - (end - start)
    # clicking the fold marker in the margin unfolds it
    view.scroll_to_line(start, center=False)
    view.verticalScrollBar().setValue(view.row_of_line(start))
    y = int(view._lh * 0.5)
    qtbot.mouseClick(view._gutter_widget, pytest.importorskip("PySide6.QtCore").Qt.MouseButton.LeftButton,
                     pos=pytest.importorskip("PySide6.QtCore").QPoint(5, y))  # fmt: skip
    assert not view.is_folded(start)
    assert all(view.is_line_visible(i) for i in range(start, end + 1))
    # the shortcut folds the region around the cursor
    view.go_to_line(start + 2)
    view.setFocus()
    qtbot.keyClick(view, "[", pytest.importorskip("PySide6.QtCore").Qt.KeyboardModifier.ControlModifier
                   | pytest.importorskip("PySide6.QtCore").Qt.KeyboardModifier.ShiftModifier)  # fmt: skip
    assert not view.is_line_visible(start + 2)


def test_go_to_symbol_definition(viewer, phase_dir):
    lines = (phase_dir / "matmul.12.vm.mlir").read_text().splitlines()
    use = next(i for i, ln in enumerate(lines) if "vm.call @hal.command_buffer.create(" in ln)
    col = lines[use].index("@hal.command_buffer.create") + 3
    target = viewer.view.go_to_definition(use, col)
    expected = next(i for i, ln in enumerate(lines)
                    if re.match(r"\s*vm\.import private @hal\.command_buffer\.create\(", ln))  # fmt: skip
    assert target == expected
    assert viewer.view.cursor_position()[0] == expected
    assert viewer.view.go_back()
    assert viewer.view.cursor_position()[0] == use


def test_go_to_function_and_value_definition(qtbot, phase_dir):
    text = (phase_dir / "matmul.6.flow.mlir").read_text()
    lines = text.splitlines()
    w = IrViewer()
    qtbot.addWidget(w)
    w.set_text(text, "flow")
    # @main_dispatch_0 is used by flow.dispatch and defined by flow.executable
    use = next(i for i, ln in enumerate(lines) if "flow.dispatch @" in ln)
    m = re.search(r"@(main_dispatch_\w+)::", lines[use])
    defn = next(
        i for i, ln in enumerate(lines) if re.match(rf"\s*flow\.executable private @{m.group(1)}\b", ln)
    )
    assert w.view.go_to_definition(use, m.start() + 1) == defn
    # a %value used on a line is defined on the first line of its function that mentions it
    use_line = next(i for i, ln in enumerate(lines) if "linalg.matmul" in ln)
    value = re.search(r"ins\((%[\w]+)", lines[use_line]).group(1)
    func_start = max(i for i in range(use_line) if "func.func" in lines[i])
    expected = next(
        i for i in range(func_start, use_line + 1) if re.search(re.escape(value) + r"\b", lines[i])
    )
    col = lines[use_line].index(value) + 1
    assert w.view.go_to_definition(use_line, col) == expected
    assert w.view.go_to_definition(0, 0) is None  # nothing under the cursor


def test_tokenizer_classes():
    spans = tokenize("%0 = vm.call @foo(%arg0) : (i32) -> i32 // done")
    text = "%0 = vm.call @foo(%arg0) : (i32) -> i32 // done"
    kinds = {text[s : s + n]: k for s, n, k in spans}
    assert kinds["%0"] == SSA and kinds["%arg0"] == SSA
    assert kinds["vm.call"] == OP
    assert kinds["@foo"] == SYMBOL


def test_a_dialect_resource_key_is_not_an_op():
    # PyTorch's weights are dialect resources named like torch_tensor_4_16_torch.float32: the dot made the
    # key read as an op (bold blue) on every line of EfficientViT's global lists and its resources block.
    def kinds(text):
        return {text[s : s + n]: k for s, n, k in tokenize(text)}

    line = "    dense_resource<torch_tensor_4_16_16_torch.float32_1> : tensor<4x16x16xf32>,"
    assert kinds(line)["torch_tensor_4_16_16_torch.float32_1"] == ATTRIBUTE
    assert kinds(line)["dense_resource"] == KEYWORD
    entry = '      __auto.constant_4_49_49_torch.float32$1: "0x0400000000000000",'
    assert kinds(entry)["__auto.constant_4_49_49_torch.float32$1"] == ATTRIBUTE
    assert kinds("%1 = util.global.load @x : tensor<4xf32>")["util.global.load"] == OP  # ops unchanged


def test_big_file_opens_fast(qtbot, phase_dir, tmp_path):
    import time

    chunk = (phase_dir / "matmul.12.vm.mlir").read_bytes()
    data = chunk * (8_000_000 // len(chunk) + 1)  # ~8 MB, keeps the test quick
    doc_t = time.perf_counter()
    doc = IrDocument(data)
    w = IrViewer()
    qtbot.addWidget(w)
    w.resize(900, 500)
    w.set_document(doc, "big")
    w.show()
    qtbot.waitExposed(w)
    elapsed = time.perf_counter() - doc_t
    assert doc.line_count == data.count(b"\n")
    assert elapsed < 3.0
    w.view.scroll_to_line(doc.line_count - 5)
    assert doc.line_count - 5 in w.view.visible_lines().tolist()
