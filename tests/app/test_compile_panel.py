"""The compile panel end to end with the real compiler engine: compile, phases, timeline, IR, diff,
diagnostics, two variants, cancel, saved options."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QSettings, Qt

from app.views.compile_panel import CompilePanel
from engine.compiler import PHASES
from engine.samples import sample_path


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "lens.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def panel(qtbot, settings):
    w = CompilePanel(settings=settings)
    qtbot.addWidget(w)
    w.resize(1300, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.cancel()


def _compile(qtbot, panel, fn=None, timeout=60_000):
    runners = (fn or panel.compile)()
    assert runners
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=timeout)
    return runners


def test_compile_shows_phases_timeline_and_ir(qtbot, panel):
    panel.set_source(sample_path("matmul"))
    panel.options.target.setCurrentText("llvm-cpu")
    with qtbot.waitSignal(panel.compilationFinished, timeout=60_000) as done:
        panel.compile()
    comp = done.args[0]
    qtbot.waitUntil(lambda: not panel.is_busy())
    assert comp.ok
    assert [
        panel.phase_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(panel.phase_list.count())
    ] == list(PHASES)
    assert panel.progress.value() == len(PHASES)
    lay = panel.timeline.timeline_layout()
    assert lay is not None and lay.phase_names[: len(PHASES)] == list(PHASES)
    # clicking the flow phase on the timeline shows its snapshot in the viewer
    pos = panel.timeline.phase_scene_pos("flow")
    qtbot.mouseClick(panel.timeline.plot.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert panel.shown_phase == "flow"
    assert panel.viewer.document().text() == comp.phase("flow").path.read_text()
    # diff of two selected phases
    for i in range(panel.phase_list.count()):
        item = panel.phase_list.item(i)
        item.setSelected(item.data(Qt.ItemDataRole.UserRole) in ("flow", "stream"))
    panel.diff_selected_phases()
    assert panel.tabs.currentWidget() is panel.diff_view
    assert panel.diff_view.diff.changes


def test_invalid_mlir_gives_a_diagnostic_that_opens_the_source(qtbot, panel, tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.addf %a, %a : tensor<4xf32>\n"
        "  %1 = arith.mulf %0, %b : tensor<4xf32>\n"
        "  return %1 : tensor<4xf32>\n"
        "}\n"
    )
    panel.set_source(bad)
    _compile(qtbot, panel)
    assert panel.compilations and not panel.current.ok
    assert panel.diagnostics.isVisibleTo(panel)  # hidden while a compilation has none
    errors = [
        panel.diagnostics.item(i).data(Qt.ItemDataRole.UserRole) for i in range(panel.diagnostics.count())
    ]
    err = next(d for d in errors if d.severity == "error")
    assert err.line == 3
    panel.viewer.go_to_line(0)
    panel.open_diagnostic(err)
    assert panel.viewer.view.cursor_position()[0] == 2  # 0-based line 3
    assert "%b" in panel.viewer.document().line(2)


def test_two_variants_side_by_side(qtbot, panel):
    panel.set_source(sample_path("elementwise"))
    panel.options.target.setCurrentText("llvm-cpu")
    panel.variant_b.target.setCurrentText("vmvx")
    _compile(qtbot, panel, panel.compile_two_variants)
    qtbot.waitUntil(lambda: len(panel.compilations) == 2 and panel.diff_view.diff is not None, timeout=10_000)
    targets = sorted(c.request.target for _, c in panel.compilations)
    assert targets == ["llvm-cpu", "vmvx"]
    assert panel.tabs.currentWidget() is panel.diff_view
    assert panel.diff_view.diff.changes  # the two targets' executables differ


def test_cancel_stops_the_compile_quickly(qtbot, panel):
    panel.set_source(sample_path("mlp"))
    runners = panel.compile()
    assert panel.is_busy() and panel.cancel_button.isEnabled()
    t = time.monotonic()
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.is_busy(), timeout=5000)
    assert time.monotonic() - t < 1.5
    assert runners[0].wait(1.0)
    assert panel.compile_button.isEnabled()


def test_options_are_saved(qtbot, settings, tmp_path):
    a = CompilePanel(settings=settings)
    qtbot.addWidget(a)
    a.set_source(sample_path("matmul"))
    a.options.target.setCurrentText("vmvx")
    a.options.conversions["demote-f32-to-f16"].setChecked(True)
    a.options.flags.setText("--iree-opt-level=O3")
    a.save_settings()
    b = CompilePanel(settings=QSettings(settings.fileName(), QSettings.Format.IniFormat))
    qtbot.addWidget(b)
    assert b.options.target.currentText() == "vmvx"
    assert b.options.conversions["demote-f32-to-f16"].isChecked()
    assert not b.options.conversions["demote-i64-to-i32"].isChecked()
    assert b.options.flags.text() == "--iree-opt-level=O3"
    assert b.source.text() == str(sample_path("matmul"))
    req = b.options.request(sample_path("matmul"))
    assert "--iree-input-demote-f32-to-f16" in req.compiler_flags()
    assert "--iree-opt-level=O3" in req.compiler_flags()


def test_a_gpu_target_compiles_phase_by_phase_without_the_gpu(qtbot, panel):
    """CUDA and ROCm are offered: their phases and executables can be read where no such GPU is."""
    from engine.runtime.vmfb.module import open_vmfb

    offered = [panel.options.target.itemText(i) for i in range(panel.options.target.count())]
    assert {"llvm-cpu", "vulkan-spirv", "cuda", "rocm"} <= set(offered)
    panel.set_source(sample_path("matmul"))
    panel.options.target.setCurrentText("cuda")
    assert not panel.options.target_cpu.isEnabled()
    with qtbot.waitSignal(panel.compilationFinished, timeout=60_000) as done:
        panel.compile()
    comp = done.args[0]
    qtbot.waitUntil(lambda: not panel.is_busy())
    assert comp.ok and comp.request.target == "cuda"
    assert panel.phase_list.count() == len(PHASES)
    assert {x.format for x in open_vmfb(comp.vmfb_path).executables} == {"cuda-nvptx-fb"}
