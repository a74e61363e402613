"""The run dispatch list in a 1366x768 window: enough rows to find one's way in a model's dispatches."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from app.views.run_dispatch_list import RunDispatch


@pytest.mark.parametrize("size,rows", [((1366, 768), 5), ((1920, 1080), 8)], ids=["1366x768", "1920x1080"])
def test_the_run_dispatch_list_shows_five_rows_at_1366(qtbot, main_window, size, rows):
    """Walk, attention_block stopped at a dispatch at 1366x768: the list showed three rows under its title, its
    filter row and its header (the bottom docks had 175 px)."""
    window = main_window
    window.resize(*size)
    window.apply_default_sizes()
    window.docks["run_dispatch_list"].raise_()
    QApplication.processEvents()
    qtbot.wait(50)
    runs = window.docks["run_dispatch_list"].widget()
    runs.model.set_rows([RunDispatch(i, f"model$async_dispatch_{i}_generic", None) for i in range(40)])
    runs.title.setText("40 dispatches in execution order · paused at #2 · the rest are listed as the run reaches them")
    QApplication.processEvents()
    table = runs.table
    shown = table.viewport().height() // table.verticalHeader().defaultSectionSize()
    assert shown >= rows, (shown, window.docks["run_dispatch_list"].height())
    # The title on the filter's row, one line: its whole text in the tooltip where the width cuts it.
    assert runs.title.y() == pytest.approx(runs.filter_edit.y(), abs=8)
    assert runs.title.toolTip() == runs.title.text()
    if size[0] == 1920:  # room for both: a finished run's title whole, the filter the rest
        runs.title.setText("962 dispatches in execution order · finished")
        QApplication.processEvents()
        assert not runs.title.is_elided() and runs.filter_edit.width() > runs.title.width()
    else:
        assert runs.filter_edit.width() >= runs.filter_edit.minimumWidth()


def test_enter_on_a_row_goes_to_that_dispatch(qtbot, main_window):
    """Walk, efficientvit finished: a row picked and Enter pressed did nothing (only a double-click went)."""
    from PySide6.QtCore import Qt

    runs = main_window.docks["run_dispatch_list"].widget()
    main_window.docks["run_dispatch_list"].raise_()
    runs.model.set_rows([RunDispatch(i, f"model$async_dispatch_{i}_generic", 36) for i in range(10)])
    asked = []
    runs.go_to = asked.append  # what Enter asks for (travelling needs a recorded run: test_run_state)
    runs.select_ordinal(4)
    runs.table.setFocus()
    qtbot.waitUntil(runs.table.hasFocus)
    qtbot.keyClick(runs.table, Qt.Key.Key_Return)
    assert asked == [4]


def test_each_run_of_a_deduplicated_dispatch_shows_its_own_place(qtbot, main_window, tmp_path):
    """The attention block's q, k and v projections are one deduplicated executable dispatched from lines 17,
    18 and 19; the module records line 17 for it, so every run showed line 17. Read from the flow phase on a
    thread of its own, each run shows its own place once the call's runs are all listed (the k-th run the k-th
    place, as by-source places time); until then the recorded line says it is one of three."""
    from support import SHARED_MODELS, compile_for

    from app.views.dispatch_list_model import source_lines_job
    from app.views.run_dispatch_list import SourcePlacesJob

    source = SHARED_MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    vmfb = compile_for(source, tmp_path / "attention_block.vmfb", "llvm-cpu")
    job = SourcePlacesJob(str(vmfb))
    with qtbot.waitSignal(job.done, timeout=120_000) as got:
        job.start()
    path, places = got.args[0]
    projection = "attention_block$async_dispatch_2_batch_matmul_1x8x32x32_f32"
    assert path == str(vmfb) and list(places) == [projection], places
    assert [p.split()[0] for p in places[projection]] == [f"attention_block.mlir:{n}" for n in (17, 18, 19)]
    model = main_window.docks["run_dispatch_list"].widget().model
    model.set_source_lines(source_lines_job(str(vmfb)))
    names = ["attention_block$async_dispatch_0_reduction_8x32_f32", projection, projection, projection]
    model.set_rows([RunDispatch(i, n, 36) for i, n in enumerate(names)])
    model.set_source_places(places, runs_complete=False)
    assert [model.source_of(r) for r in model.rows[1:]] == [
        'attention_block.mlir:17 torch.operator "onnx.MatMul" (one of its 3 places)'] * 3  # fmt: skip
    model.set_source_places(places, runs_complete=True)
    assert [model.source_of(r) for r in model.rows[1:]] == [
        f'attention_block.mlir:{n} torch.operator "onnx.MatMul" (place {k} of 3)' for k, n in ((1, 17), (2, 18), (3, 19))
    ]  # fmt: skip
    assert model.source_of(model.rows[0]).startswith("attention_block.mlir:16")
    # Runs that are not a whole number of rounds of the places: no place is claimed.
    model.set_rows([RunDispatch(i, n, 36) for i, n in enumerate(names[:3])])
    assert model.source_of(model.rows[1]).endswith("(one of its 3 places)")
