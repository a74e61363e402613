"""The Zones view's "By source" table: a real profile of small_cnn (IREE's HAL profiler) with its dispatch
time by line of the ONNX import, most expensive first; selecting a line marks its dispatches in the
timeline and moves the context to the first of them; activating it opens the program at that line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.context import LensContext
from app.run_profile import profile_run_job
from app.views.ir_viewer import IrViewer
from app.views.zones_view import ZonesView

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import SHARED_MODELS, compile_for  # noqa: E402
from support.app import save_screenshot


@pytest.fixture(scope="module")
def small_cnn_profile(tmp_path_factory):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path_factory.mktemp("by_source") / "small_cnn.vmfb", "llvm-cpu")
    return profile_run_job(str(vmfb), "small_cnn", [f"@{SHARED_MODELS / 'small_cnn_x.npy'}"], "local-sync")


def test_by_source_table_select_and_open(qtbot, small_cnn_profile):
    loaded = small_cnn_profile
    assert loaded.by_source is not None, loaded.by_source_note
    context = LensContext()
    opened: list[tuple[str, str]] = []

    def open_document(widget, title, key=None):
        qtbot.addWidget(widget)
        opened.append((title, key))
        return widget

    v = ZonesView(context=context, open_document=open_document)
    qtbot.addWidget(v)
    v.resize(1366, 700)
    v.show()
    qtbot.waitExposed(v)
    v.set_trace(loaded.trace, loaded.index, loaded.stats, loaded.by_source, loaded.by_source_note)
    v.tables.setCurrentWidget(v.by_source)
    table = v.by_source
    rows = [table.row_at(r) for r in range(table.proxy.rowCount())]
    # Sorted by time, largest first; the lines sum to the profile's dispatch time.
    assert [r.time_ns for r in rows] == sorted((r.time_ns for r in rows), reverse=True)
    dispatch_ns = int(sum(loaded.trace.zones.duration[i] for i in loaded.trace.name_ids("dispatch")))
    assert sum(r.time_ns for r in rows) == dispatch_ns
    assert table.proxy.index(0, 1).data().startswith("onnx.")  # torch.operator "onnx.Conv" shown as onnx.Conv
    assert table.proxy.index(0, 3).data().endswith("%")
    # An ONNX import's ops are the frontend's (torch.operator "onnx.*"), not "torch ops"; a narrow pane elides.
    assert "% on lines holding the frontend's ops (torch, ONNX, StableHLO, TOSA)" in table.note.text()
    assert table.note.toolTip().startswith(table.note.text())
    table.note.resize(200, table.note.height())
    assert table.note.is_elided() and table.note.shown_text().endswith("…")
    # Select the first line: its dispatches are marked, the context goes to the first of them in the run.
    with qtbot.waitSignal(table.lineSelected, timeout=2000) as sig:
        table.select_row(0)
    row = sig.args[0]
    ids = {loaded.trace.names.id_of(name) for name in row.dispatches}
    assert set(v.timeline.item.highlight_names) == ids
    order = loaded.trace.zones_in_time_order("dispatch")
    first = next(int(i) for i in order if int(loaded.trace.zones.name[i]) in ids)
    assert context.dispatch == loaded.trace.zone(first).name  # by IREE's name (run ordinals are the run state's)
    # Activating it opens the input program at the line (0-based in the viewer).
    shown = v.open_source_line(row)
    assert isinstance(shown, IrViewer) and opened[-1][1].startswith("source:")
    line = int(row.loc.rpartition(":")[2])
    assert shown.view.cursor_position()[0] == line - 1
    assert "onnx." in shown.document().line(line - 1)
    save_screenshot(v, "zones_by_source")
    v.shutdown()


def test_a_trace_without_attribution_says_why(qtbot, small_cnn_profile):
    v = ZonesView()
    qtbot.addWidget(v)
    v.set_trace(small_cnn_profile.trace, small_cnn_profile.index, small_cnn_profile.stats)
    assert v.by_source.proxy.rowCount() == 0
    assert "no source attribution" in v.by_source.note.text()
    assert np.all(v.timeline.item.highlight_names == ())
    v.shutdown()


def test_run_dispatch_list_names_each_dispatch_source_line(qtbot, main_window, tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    window = main_window
    window.open_file(vmfb)
    qtbot.waitUntil(lambda: window.workbench.module is not None, timeout=60_000)
    model = window.panels["run_dispatch_list"].model
    qtbot.waitUntil(lambda: bool(model.source_lines), timeout=60_000)
    # The Source column sits before the Verdict, which stays last.
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert headers[-2:] == ["Source", "Verdict"]
    # IREE records the first convolution's dispatch at the onnx.Conv on line 10 of the input program.
    conv = next(name for name in model.source_lines if "conv_8x16x16" in name)
    assert model.source_lines[conv] == 'small_cnn.mlir:10 torch.operator "onnx.Conv"'
    lines = source.read_text().splitlines()
    for text in model.source_lines.values():
        number = int(text.split()[0].rpartition(":")[2])
        assert "onnx." in lines[number - 1]


def test_the_run_list_follows_a_source_line_chosen_in_zones(qtbot, main_window, small_cnn_profile):
    # The run list holding the profiled call's dispatches (as a finished run lists them, by ordinal):
    # choosing a By source line moves the shared context, and the run dispatch list selects that dispatch.
    from app.views.run_dispatch_list import RunDispatch

    loaded = small_cnn_profile
    trace = loaded.trace
    order = trace.zones_in_time_order("dispatch")
    runs = main_window.panels["run_dispatch_list"]
    runs.model.set_rows(
        [RunDispatch(trace.zone(int(i)).args["ordinal"], trace.zone(int(i)).name, None) for i in order]
    )
    zones = main_window.show_panel("zones")
    zones.set_trace(loaded.trace, loaded.index, loaded.stats, loaded.by_source)
    row = next(r for r in loaded.by_source.by_source if r.loc.endswith(":13"))  # the second conv
    zones.select_source_line(row)
    selected = runs.selected_ordinal()
    assert selected is not None
    assert "conv_16x8x8" in runs.model.rows[runs.model.row_of(selected)].name


def test_the_dispatches_panel_names_the_dispatch_source_line(qtbot, tmp_path):
    from app.context import LoadedModule
    from app.messages import MessageLog
    from app.panels import PanelServices
    from app.views.dispatch_panel import DispatchPanel
    from app.workers import EngineWorker
    from engine.runtime.vmfb.module import open_vmfb

    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    context = LensContext()
    worker = EngineWorker()
    panel = DispatchPanel(PanelServices(context, worker, MessageLog(), lambda _path: None))
    qtbot.addWidget(panel)
    try:
        context.set_module(LoadedModule(vmfb, open_vmfb(vmfb)))
        gemm = next(n for n in panel.names() if "matmul" in n)
        context.set_dispatch(gemm)
        first = panel.locations.topLevelItem(0)
        # small_cnn.mlir line 17 is the onnx.Gemm IREE made that matmul from.
        assert first.text(0) == "input program" and first.text(1) == "17"
        assert first.text(3) == 'small_cnn.mlir:17 torch.operator "onnx.Gemm"'
    finally:
        worker.shutdown()


def test_a_capture_bundle_list_reads_its_verdicts_by_source_line(qtbot, tmp_path):
    # A bundle compared with another capture: each row has its Source line beside its Verdict.
    from app.views.dispatch_run_list import DispatchRunView
    from engine.dispatch.capture import capture_debug

    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    x = f"@{SHARED_MODELS / 'small_cnn_x.npy'}"
    capture_debug(vmfb, "small_cnn", [x], tmp_path / "a")
    capture_debug(vmfb, "small_cnn", [x], tmp_path / "b")
    view = DispatchRunView()
    qtbot.addWidget(view)
    assert view.open_bundle(tmp_path / "a")
    model = view.model
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert headers[-2:] == ["Source", "Verdict"]
    assert view.set_reference(tmp_path / "b")
    qtbot.waitUntil(lambda: bool(model.verdicts), timeout=60_000)
    conv = next(r for r, e in enumerate(model.entries) if "conv_8x16x16" in e.name)
    assert model.index(conv, len(headers) - 2).data() == 'small_cnn.mlir:10 torch.operator "onnx.Conv"'
    assert model.index(conv, len(headers) - 1).data()  # the same program twice: its verdict is shown
