"""The workbench as a user meets it: the default layout at 1366x768 and 1920x1080 (every dock shows its
content, documents get the middle; screenshots saved), a PyTorch-style ``module @module`` source opened
from File > Open shows all twelve phases, and inputs made from the signature run a function untyped."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from support import iree_tool

from app.views.compilation_document import CompilationDocument
from engine.compiler import PHASES

SIZES = [(1366, 768), (1920, 1080)]
# Where the screenshots go: $LENS_SCREENSHOT_DIR (docs/screenshots when the README's pictures are made).
SCREENSHOT_ENV = "LENS_SCREENSHOT_DIR"

TORCH_STYLE = """\
module @module {
  func.func @main$async(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = arith.addf %a, %b : tensor<2x3xf32>
    %1 = math.exp %0 : tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = call @main$async(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = arith.mulf %0, %b : tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
}
"""


def settle(qtbot, window) -> None:
    window.apply_default_sizes()
    QApplication.processEvents()
    qtbot.wait(50)


def phases_document(window) -> CompilationDocument | None:
    return next((d for d in window.documents.documents() if isinstance(d, CompilationDocument)), None)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_default_layout_is_usable(qtbot, main_window, compiled, tmp_path, size):
    window = main_window
    window.resize(*size)
    settle(qtbot, window)
    assert (window.width(), window.height()) == size
    # The documents keep the middle: at least 40% of the width and half the height.
    docs = window.documents
    assert docs.width() >= 0.4 * size[0] and docs.height() >= 0.5 * size[1], docs.size()
    for panel_id, dock in window.docks.items():
        assert dock.isVisible() and not dock.isFloating(), panel_id
        dock.raise_()
        QApplication.processEvents()
        widget = dock.widget()
        hint = widget.minimumSizeHint()
        # Usable: at least the panel's own minimum and room for several lines and a real width.
        assert widget.width() >= max(hint.width(), 190), (panel_id, widget.size(), hint)
        assert widget.height() >= max(hint.height(), 130), (panel_id, widget.size(), hint)
    # The stepper (disassembly, registers, call stack) gets a tall column.
    assert window.docks["stepper"].height() >= 0.6 * size[1]

    # A module open, function main's disassembly in the inspector, the stepper stopped at its entry with
    # inputs made from the signature: the screenshots.
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=60_000):
        window.open_file(compiled.path("mlp", "llvm-cpu"))
    qtbot.waitUntil(lambda: bool(panel.inputs), timeout=10_000)
    panel.restore_banner.hide()
    functions = window.module_view.expand_path("Functions")
    main = next(functions.child(i) for i in range(functions.childCount()) if functions.child(i).text(0).endswith(" main"))
    window.module_view.tree.setCurrentItem(main)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=60_000):
        panel.run_to_entry()
    window._raise_default_tabs()
    settle(qtbot, window)
    qtbot.wait(300)
    out = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    shot = out / f"window-{size[0]}x{size[1]}.png"
    assert window.grab().save(str(shot))
    assert shot.stat().st_size > 10_000


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # a floating dock, offscreen
def test_reset_layout_brings_every_dock_back(qtbot, main_window):
    window = main_window
    window.resize(1366, 768)
    settle(qtbot, window)
    window.docks["log"].hide()
    window.docks["module"].setFloating(True)
    window.resizeDocks([window.docks["stepper"]], [200], Qt.Orientation.Horizontal)
    window.reset_layout_action.trigger()
    settle(qtbot, window)
    for panel_id, dock in window.docks.items():
        assert dock.isVisible() and not dock.isFloating(), panel_id
    assert window.docks["stepper"].width() >= 0.3 * 1366


def test_open_torch_style_module_shows_all_twelve_phases(qtbot, main_window, tmp_path):
    source = tmp_path / "exported.mlir"  # named unlike its module: IREE calls it "module"
    source.write_text(TORCH_STYLE)
    progress = []
    main_window.worker.progressed.connect(progress.append)
    main_window.open_file(source)
    qtbot.waitUntil(lambda: phases_document(main_window) is not None, timeout=120_000)
    # The compile reported its phases as it went (the status bar's progress bar shows them).
    assert any(p.fraction > 0 and "phase" in p.text for p in progress), progress
    assert max(p.fraction for p in progress) == 1.0
    document = phases_document(main_window)
    assert document.phases == list(PHASES)
    assert main_window.documents.currentWidget() is document
    # The last snapshot is what it shows first, read from IREE's own file name.
    assert document.shown_phase == "vm"
    assert document.compilation.phase("vm").path.name == "module.12.vm.mlir"
    assert "vm.module public @module" in document.compilation.phase("vm").text()
    assert main_window.documents.tabText(main_window.documents.currentIndex()) == "Phases — exported.mlir"
    # The compile panel lists the compilation too.
    panel = main_window.panels["compile"]
    assert any(c is document.compilation for _, c in panel.compilations)
    assert document.show_phase("flow") and main_window.context.phase == "flow"
    # A diff is a document too: flow against dispatch-creation, with changes on both sides.
    document.diff_button.click()
    diff = main_window.documents.currentWidget()
    assert main_window.documents.title(main_window.documents.currentIndex()) == "Diff dispatch-creation → flow"
    assert diff.diff.changes and diff.diff.changed_lines("left") and diff.diff.changed_lines("right")
    # The functions are there under IREE's names, main$async included.
    names = {f.name for f in main_window.context.module.module.exports}
    assert {"main", "main$async"} <= names


def test_prefilled_inputs_run_the_function_without_typing(qtbot, main_window, compiled):
    vmfb = compiled.path("mlp", "llvm-cpu")
    panel = main_window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=60_000):
        main_window.open_file(vmfb)
    qtbot.waitUntil(lambda: panel.function_combo.currentText() == "main", timeout=10_000)
    # Chosen function, empty line: the inputs are made from iree.abi.declaration (2x16xf32 zeros).
    qtbot.waitUntil(lambda: panel.inputs == ("2x16xf32=0",), timeout=5_000)
    main_window.run_inputs.prefill(fill="ones")
    assert panel.inputs == ("2x16xf32=1",)
    with qtbot.waitSignal(panel.bridge.finished, timeout=60_000) as done:
        main_window.run_action.trigger()
    expected = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={vmfb}", "--function=main", "--input=2x16xf32=1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours = done.args[0].results_text
    assert expected.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in ours
    # Remembered per module and function: another choice of the same function brings them back.
    panel.inputs_edit.clear()
    assert main_window.run_inputs.remembered("main") == ("2x16xf32=1",)
    main_window.run_inputs.prefill()
    assert panel.inputs == ("2x16xf32=1",)


def test_numpy_inputs_by_drop(qtbot, main_window, compiled, tmp_path):
    import numpy as np
    from support.app import drop_files

    vmfb = compiled.path("mlp", "llvm-cpu")
    panel = main_window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=60_000):
        main_window.open_file(vmfb)
    x = tmp_path / "x.npy"
    np.save(x, np.full((2, 16), 0.5, dtype=np.float32))
    assert drop_files(qtbot, main_window, [x])
    assert panel.inputs == (f"@{x}",)
    assert main_window.context.module.path == vmfb  # a dropped array is an input, not a file to open


def test_toolbar_compile_opens_the_phases(qtbot, main_window):
    from engine.samples import sample_path

    panel = main_window.panels["compile"]
    panel.set_source(sample_path("softmax"))
    panel.options.target.setCurrentText("vmvx")
    with qtbot.waitSignal(panel.compilationFinished, timeout=120_000):
        main_window.compile_action.trigger()
    qtbot.waitUntil(lambda: phases_document(main_window) is not None, timeout=10_000)
    document = phases_document(main_window)
    assert document.phases == list(PHASES) and document.compilation.request.target == "vmvx"
    assert main_window.documents.currentWidget() is document


def test_opening_a_diff_keeps_the_docks_widths(qtbot, main_window, tmp_path):
    """At 1366x768 the diff's summary line (~450 px) and its two buttons set its minimum width above what the
    documents had: opening "Diff with previous phase" squeezed the module dock and the stepper to make room
    (the docks jumped ~40 and ~65 px). The summary and the side titles are elided; the docks stay put."""
    window = main_window
    window.resize(1366, 768)
    settle(qtbot, window)
    source = tmp_path / "exported.mlir"
    source.write_text(TORCH_STYLE)
    window.open_file(source)
    qtbot.waitUntil(lambda: phases_document(window) is not None, timeout=120_000)
    settle(qtbot, window)
    document = phases_document(window)
    assert document.show_phase("vm")
    QApplication.processEvents()
    widths = {name: dock.width() for name, dock in window.docks.items() if dock.isVisible()}
    document.diff_button.click()
    diff = window.documents.currentWidget()
    assert window.documents.title(window.documents.currentIndex()) == "Diff hal → vm"
    QApplication.processEvents()
    qtbot.wait(100)
    after = {name: dock.width() for name, dock in window.docks.items() if dock.isVisible()}
    assert after == widths
    assert diff.summary.toolTip() == diff.summary.text() and "changed region" in diff.summary.text()
    assert diff.minimumSizeHint().width() <= window.documents.width()
    out = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path)
    assert window.grab().save(str(out / "diff-1366x768.png"))
