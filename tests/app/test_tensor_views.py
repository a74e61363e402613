"""The tensor inspector and the dispatch run list, on real captures of compiled programs."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, QRectF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from support import iree_compile
from support.app import save_screenshot

from app.main import configure_pyqtgraph
from app.views.dispatch_run_list import DispatchRunView
from app.views.tensor_inspector import InspectedTensor, TensorInspector
from engine.compiler.targets import target_flags
from engine.dispatch.capture import capture_debug
from engine.samples import sample_path

configure_pyqtgraph()


@pytest.fixture(scope="module")
def mlp_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    vmfb = root / "mlp.vmfb"
    iree_compile(
        # The executable sources beside the module type the captured tensors (without them a capture
        # holds exactly the bound bytes, untyped, and judges no health).
        [str(sample_path("mlp")), *target_flags("llvm-cpu"), "-o", str(vmfb),
         f"--iree-hal-dump-executable-sources-to={root / 'sources'}"],
        check=True,
    )  # fmt: skip
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(2, 16)
    np.save(root / "x.npy", x)
    capture_debug(vmfb, "main", [f"@{root / 'x.npy'}"], root / "bundle")
    return root / "bundle"


def _shot(widget, name: str) -> None:
    save_screenshot(widget, f"tensor_{name}")


def test_inspector_shows_stats_slices_and_hover_values(qtbot):
    view = TensorInspector()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    a = np.arange(3 * 40 * 60, dtype=np.float32).reshape(3, 40, 60) / 100.0
    a[1, 5, 7] = np.nan
    view.set_tensors([InspectedTensor("output 0", a, "3x40x60xf32")])
    view.show()
    qtbot.waitExposed(view)
    assert "3x40x60 f32" in view.summary.text() and "NaN 1" in view.summary.text()
    # Default slice: the last two axes at d0 = 0; moving d0 to 1 shows that plane in the table.
    assert view.table_model.rowCount() == 40 and view.table_model.columnCount() == 60
    view.index_spins[0].setValue(1)
    idx = view.table_model.index(2, 3)
    assert view.table_model.data(idx) == f"{a[1, 2, 3]:.6g}"
    assert view.table_model.data(view.table_model.index(5, 7)) == "nan"
    # Rows = d0, columns = d2 at d1 = 4.
    view.row_axis.setCurrentIndex(0)
    view.col_axis.setCurrentIndex(2)
    view.index_spins[0].setValue(4)
    assert np.array_equal(view.current_plane(), a[:, 4, :], equal_nan=True)
    # Hovering the heatmap reports the index and value under the mouse.
    view.row_axis.setCurrentIndex(1)
    view.col_axis.setCurrentIndex(2)
    view.index_spins[0].setValue(2)
    heat = view.heatmap
    qtbot.wait(50)
    scene_pos = heat.view.mapViewToScene(QPointF(10.5, 20.5))
    heat.scene().sigMouseMoved.emit(scene_pos)
    assert view.hover.text() == f"[20, 10] = {a[2, 20, 10]:.7g}"
    # A click there selects that element, as a table cell does (what Step Into Workgroup... asks for), and
    # outlines it; a cell picked in the table is outlined on the heatmap.
    assert view.selected_element() is None and not heat.marker.isVisible()
    qtbot.mouseClick(heat.viewport(), Qt.MouseButton.LeftButton, pos=heat.mapFromScene(scene_pos))
    assert view.selected_element() == (2, 20, 10)
    assert heat.marker.isVisible() and heat.marker.rect() == QRectF(10, 20, 1, 1)
    view.table.setCurrentIndex(view.table_model.index(3, 4))
    assert view.selected_element() == (2, 3, 4) and heat.marker.rect() == QRectF(4, 3, 1, 1)
    view.index_spins[0].setValue(1)  # another slice: nothing of it is selected yet
    assert not heat.marker.isVisible()
    _shot(view, "inspector_heatmap")
    view.tabs.setCurrentIndex(1)
    _shot(view, "inspector_table")
    view.tabs.setCurrentIndex(2)
    _shot(view, "inspector_histogram")


def test_a_one_dimensional_tensor_offers_no_axes_to_choose(qtbot):
    """A 1-D tensor (an untyped binding's bytes, a bias) is one row of its d0: the rows axis says so and the
    axes are not offered as a choice (d0 for rows and d0 for columns changed nothing); a 2-D one has both."""
    view = TensorInspector()
    qtbot.addWidget(view)
    view.set_tensors([InspectedTensor("binding 0", np.arange(96, dtype=np.uint8), "96 bytes"),
                      InspectedTensor("output 0", np.ones((4, 8), np.float32), "4x8xf32")])  # fmt: skip
    view.tensor_list.setCurrentRow(0)
    assert [view.row_axis.itemText(i) for i in range(view.row_axis.count())] == ["one row"]
    assert not view.row_axis.isEnabled() and not view.col_axis.isEnabled()
    assert view.table_model.rowCount() == 1 and view.table_model.columnCount() == 96
    view.tensor_list.setCurrentRow(1)
    assert view.row_axis.isEnabled() and view.row_axis.count() == 2 and view.table_model.rowCount() == 4


def test_a_complex_tensor_is_shown_as_its_real_and_imaginary_parts(qtbot):
    """A complex tensor (IREE's runtime traces complex<f32> as complex64) was widened to its real part for the
    statistics, histogram and heatmap: a NaN in an imaginary part was not seen, the numbers were of half the
    values. Now (re, im) pairs, one more axis of 2, and the type says so."""
    view = TensorInspector()
    qtbot.addWidget(view)
    z = np.array([1 + 2j, complex(3, np.nan), -4 - 5j], np.complex64)
    view.set_tensors([InspectedTensor("output 0", z, "3xcomplex<f32>")])
    view.tensor_list.setCurrentRow(0)
    assert view.array.shape == (3, 2) and view.array.dtype == np.float32
    assert view.array[:, 0].tolist() == [1, 3, -4] and view.array[0, 1] == 2 and view.array[2, 1] == -5
    assert view.stats.nan == 1 and view.stats.min == -5 and view.stats.max == 3
    assert view.first_bad == (1, 1) and view.type_edit.text() == "3xcomplex<f32>, as (re, im) pairs"


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # the tooltip window, offscreen
def test_stats_split_inf_signs_and_the_heatmap_legend_names_the_overlay(qtbot):
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtWidgets import QApplication, QToolTip

    from app.views.tensor_inspector import NEGINF_RGBA, POSINF_RGBA

    view = TensorInspector()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    # Like a max-pool's padded input: a -Inf band along the top and left of each channel, one +Inf, no NaN.
    a = np.arange(2 * 9 * 9, dtype=np.float32).reshape(2, 9, 9)
    a[:, 0, :] = -np.inf
    a[:, :, 0] = -np.inf
    a[0, 4, 6] = np.inf
    neg_total, neg_slice = int(np.isneginf(a).sum()), int(np.isneginf(a[0]).sum())
    assert (neg_total, neg_slice) == (34, 17)
    view.set_tensors([InspectedTensor("input 0", a, "2x9x9xf32")])
    view.show()
    qtbot.waitExposed(view)
    # The stats line counts +Inf and -Inf apart (and NaN as before).
    assert "NaN 0   +Inf 1, \u2212Inf 34" in view.summary.text()
    # ... before the statistics, which say they are of the finite values; the histogram says what it leaves out.
    assert f"f32   NaN 0   +Inf 1, \u2212Inf 34   of the {a.size - 35} finite values: min 10 " in view.summary.text()
    assert view.histogram.getPlotItem().titleLabel.text == "finite values only: 35 NaN/Inf not drawn"
    # The legend: only the colours present, with counts (the slice's, and the tensor's where they differ).
    heat = view.heatmap
    legend = heat.legend.text
    assert heat.legend.isVisible()
    assert "NaN" not in legend
    assert "+Inf 1" in legend and "#%02x%02x%02x" % POSINF_RGBA[:3] in legend
    assert f"\u2212Inf {neg_slice} in this slice, {neg_total} in tensor" in legend
    assert "#%02x%02x%02x" % NEGINF_RGBA[:3] in legend
    view.index_spins[0].setValue(1)  # the other channel: no +Inf there, but the tensor has one
    assert "+Inf 0 in this slice, 1 in tensor" in heat.legend.text
    # Hovering an overlay pixel names it (tooltip on the overlay, and the hover line); a finite one does not.
    view.index_spins[0].setValue(0)
    qtbot.wait(50)
    scene_pos = heat.view.mapViewToScene(QPointF(3.5, 0.5))  # row 0, column 3: the -Inf band
    heat.scene().sigMouseMoved.emit(scene_pos)
    assert heat.nonfinite.toolTip() == "\u2212Inf at [0, 3]"
    assert view.hover.text() == "[0, 3] = \u2212Inf"
    # Qt shows that tooltip when the mouse rests there.
    viewport_pos = heat.mapFromScene(scene_pos)
    help_event = QHelpEvent(QEvent.Type.ToolTip, viewport_pos, heat.viewport().mapToGlobal(viewport_pos))
    QApplication.sendEvent(heat.viewport(), help_event)
    assert QToolTip.text() == "\u2212Inf at [0, 3]"
    QToolTip.hideText()
    heat.scene().sigMouseMoved.emit(heat.view.mapViewToScene(QPointF(6.5, 4.5)))
    assert heat.nonfinite.toolTip() == "+Inf at [4, 6]"
    heat.scene().sigMouseMoved.emit(heat.view.mapViewToScene(QPointF(5.5, 5.5)))
    assert heat.nonfinite.toolTip() == "" and view.hover.text() == f"[5, 5] = {a[0, 5, 5]:.7g}"
    _shot(view, "inspector_legend")
    assert heat.colorbar.isVisible()
    # A finite tensor: no legend at all.
    view.set_tensors([InspectedTensor("output 0", np.arange(16, dtype=np.float32).reshape(4, 4), "4x4xf32")])
    assert heat.legend.text == "" and not heat.legend.isVisible() and heat.colorbar.isVisible()
    assert "NaN 0   +Inf 0, \u2212Inf 0" in view.summary.text()
    # One value: no colour bar with a made-up -0.5..0.5 range around it; the legend says what the map shows.
    view.set_tensors([InspectedTensor("output 0", np.zeros((4, 4), np.float32), "4x4xf32")])
    assert heat.legend.text == "every finite value is 0 (one colour)" and not heat.colorbar.isVisible()
    view.set_tensors([InspectedTensor("output 0", np.full((2, 2), -np.inf, np.float32), "2x2xf32")])
    assert heat.legend.text.startswith("no finite value (one colour)   ") and not heat.colorbar.isVisible()


def test_bytes_are_read_as_a_packed_type_and_an_unpacked_tensor_goes_back_to_its_type(qtbot):
    # An untyped binding a user knows holds i4: 0x21 0x43 read as 4xi4 is 1 2 3 4 (IREE packs low bits first).
    # Was: "unknown element type 'i4'". The unpacked view of a source's 4xi4 takes its own type back.
    view = TensorInspector()
    qtbot.addWidget(view)
    view.set_tensors([InspectedTensor("binding 0", np.array([0x21, 0x43], np.uint8), "2xu8"),
                      InspectedTensor("input 0", np.array([1, 2, 3, 4], np.int8), "4xi4, unpacked from its 2 bytes",
                                      element="i4")])  # fmt: skip
    view.type_edit.setText("2x2xi4")
    view.type_edit.returnPressed.emit()
    assert view.array.tolist() == [[1, 2], [3, 4]] and view.type_error.text() == ""
    assert "2x2xi4, unpacked from its 2 bytes" in view.tensor_list.item(0).text()
    view.type_edit.setText("5xi4")
    view.type_edit.returnPressed.emit()
    assert view.type_error.text() == "5xi4 needs 3 bytes; the tensor has 2" and view.array.shape == (2, 2)
    view.tensor_list.setCurrentRow(1)
    view.type_edit.setText("4xi8")  # its bytes are the unpacked values' now: retyped as any array is
    view.type_edit.returnPressed.emit()
    assert view.array.dtype == np.int8 and "i8" in view.summary.text()
    view.type_edit.setText("4xi4, unpacked from its 2 bytes")
    view.type_edit.returnPressed.emit()
    assert view.array.tolist() == [1, 2, 3, 4] and "4 i4" in view.summary.text()


def test_type_override_and_golden_compare(qtbot, tmp_path):
    view = TensorInspector()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    values = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    raw = values.view(np.uint8).reshape(-1)  # what an untyped binding looks like
    view.set_tensors([InspectedTensor("binding 1", raw, "256xu8")])
    view.type_edit.setText("8x8xf32")
    view.type_edit.returnPressed.emit()
    assert view.array.shape == (8, 8) and view.array.dtype == np.float32
    view.type_edit.setText("100xf32")
    view.type_edit.returnPressed.emit()
    assert "needs 400 bytes" in view.type_error.text() and view.array.shape == (8, 8)
    golden = values.copy()
    golden[3, 4] += 0.25
    np.save(tmp_path / "golden.npy", golden)
    view.load_golden(str(tmp_path / "golden.npy"))
    assert "1 of 64 elements differ" in view.compare_summary.text()
    assert view.comparison.first_mismatch == (3, 4)
    err = view.error_heatmap.values
    assert err[3, 4] == pytest.approx(0.25) and err.sum() == pytest.approx(0.25)
    view.atol.setValue(0.3)
    assert view.compare_summary.text().startswith("match")
    view.tabs.setCurrentIndex(3)
    view.show()
    qtbot.waitExposed(view)
    view.atol.setValue(0.0)
    _shot(view, "inspector_compare")


def test_big_tensor_heatmap_samples_only_the_visible_region(qtbot):
    view = TensorInspector()
    qtbot.addWidget(view)
    big = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    view.set_tensors([InspectedTensor("output 0", big)])
    heat = view.heatmap
    assert heat.image.image.shape == (1024, 1024)  # downsampled whole tensor
    heat.view.setRange(xRange=(100, 300), yRange=(1000, 1100), padding=0)
    qtbot.waitUntil(lambda: heat.sampled[2] == 1, timeout=3000)
    r0, r1, rs, c0, c1, cs = heat.sampled
    assert rs == cs == 1 and r0 <= 1000 and r1 >= 1100 and r1 - r0 < 200
    assert np.array_equal(heat.image.image, big[r0:r1, c0:c1])


def test_run_list_opens_a_bundle_by_drop_and_shows_each_dispatch(qtbot, mlp_bundle, tmp_path):
    view = DispatchRunView()
    qtbot.addWidget(view)
    view.resize(1100, 800)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(mlp_bundle))])
    drop = QDropEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                      Qt.KeyboardModifier.NoModifier)
    view.dropEvent(drop)
    assert view.model.rowCount() == 2 and "2 dispatches" in view.title.text()
    m = view.model
    assert m.data(m.index(0, 1)) == "main_dispatch_0_matmul_2x32x16_f32"
    assert m.data(m.index(0, 2)) == "1x1x1" and m.data(m.index(1, 5)) == "ok"
    with qtbot.waitSignal(view.dispatchSelected) as picked:
        view.table.selectRow(1)
    assert picked.args[0].ordinal == 1
    labels = [t.label for t in view.inspector.tensors]
    assert labels == ["input 0", "output 0"] and view.inspector.array.shape == (2, 32)
    assert [t.type_text for t in view.inspector.tensors] == ["2x32xf32", "2x4xf32"]
    assert "d0 -> d1" in view.dot()
    # Compared with itself, every tensor matches.
    assert view.set_reference(mlp_bundle)
    view.inspector.tensor_list.setCurrentRow(1)
    assert view.inspector.compare_summary.text().startswith("match")
    view.show()
    qtbot.waitExposed(view)
    _shot(view, "run_list")
    # A folder that is not a bundle is reported, and the shown run stays.
    assert not view.open_bundle(tmp_path)
    assert "no manifest.json" in view.title.text() and view.model.rowCount() == 2


def test_live_capture_lists_dispatches_as_they_run_then_reopens_the_bundle(qtbot, mlp_bundle, tmp_path):
    import json
    import shutil

    view = DispatchRunView()
    qtbot.addWidget(view)
    module = json.loads((mlp_bundle / "manifest.json").read_text())["module"]
    view.capture_live(module, "main", ["2x16xf32=0.5"], str(tmp_path / "live"))
    # Rows arrive as dispatches run; the finished bundle then replaces them (same rows, manifest title).
    qtbot.waitUntil(lambda: "2 dispatches" in view.title.text(), timeout=60000)
    assert [e.ordinal for e in view.model.entries] == [0, 1]
    view.table.selectRow(1)
    assert view.inspector.tensors[-1].array.shape == (2, 4)
    # A zipped bundle opens too.
    archive = shutil.make_archive(str(tmp_path / "zipped"), "zip", str(mlp_bundle))
    assert view.open_bundle(archive) and view.model.rowCount() == 2


def test_live_capture_types_tensors_by_the_checked_rebuild(qtbot, tmp_path):
    # No sources beside the module: the window's capture typed nothing where its debugger types every tensor
    # from the checked rebuild of the program the module names; it now finds them as the debugger does.
    import json

    vmfb = tmp_path / "plain.vmfb"
    iree_compile([str(sample_path("mlp")), *target_flags("llvm-cpu"), "-o", str(vmfb)], check=True)
    view = DispatchRunView()
    qtbot.addWidget(view)
    view.capture_live(str(vmfb), "main", ["2x16xf32=0.5"], str(tmp_path / "live"))
    # Finished: the bundle reopened (the title "Capturing… 2 dispatches" comes while the manifest is unwritten:
    # waiting for that alone read an empty manifest.json on a loaded machine).
    finished = lambda: "2 dispatches" in view.title.text() and not view.title.text().startswith("Capturing")  # noqa: E731
    qtbot.waitUntil(finished, timeout=120000)
    manifest = json.loads((tmp_path / "live" / "manifest.json").read_text())
    assert manifest["sources"]["origin"] == "rebuilt", manifest["sources"]
    assert {d["tensors_from"] for d in manifest["dispatches"]} == {"interface"}


def test_bundle_opens_as_a_main_window_document(make_main_window, mlp_bundle, tmp_path):
    from app.views.dispatch_run_list import open_bundle_document

    window = make_main_window()
    view = open_bundle_document(window.open_document, mlp_bundle)
    assert isinstance(view, DispatchRunView) and window.documents.currentWidget() is view
    assert view.model.rowCount() == 2
    again = open_bundle_document(window.open_document, mlp_bundle)
    assert again is view  # the same bundle reuses its tab
    assert open_bundle_document(window.open_document, tmp_path) is None


def test_window_open_file_routes_a_bundle_to_its_dispatch_list(make_main_window, mlp_bundle):
    window = make_main_window()
    assert window.open_file(mlp_bundle) == -1  # opened at once, no module load
    view = window.documents.currentWidget()
    assert isinstance(view, DispatchRunView) and view.model.rowCount() == 2
    assert window.context.module is None  # the open module did not change


def test_window_open_file_shows_a_chrome_trace_in_the_zones_view(make_main_window, qtbot, tmp_path):
    import json

    from app.views.zones_view import ZonesView

    events = [
        {"ph": "X", "name": "main_dispatch_0", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
        {"ph": "X", "name": "main_dispatch_1", "ts": 12, "dur": 5, "pid": 1, "tid": 1},
        {"ph": "X", "name": "main_dispatch_0", "ts": 20, "dur": 8, "pid": 1, "tid": 1},
    ]
    trace = tmp_path / "run.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    window = make_main_window()
    assert "Zones" not in [window.documents.tabText(i) for i in range(window.documents.count())]
    window.open_file(trace)
    view = window.documents.currentWidget()
    assert isinstance(view, ZonesView)
    qtbot.waitUntil(lambda: view.trace is not None, timeout=30000)
    assert len(view.trace.zones) == 3


def test_type_field_shows_a_long_type_whole(qtbot):
    view = TensorInspector()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.set_tensors([InspectedTensor("binding 0", np.zeros(1024, np.uint8), "1024 bytes, untyped")])
    view.show()
    qtbot.waitExposed(view)
    edit = view.type_edit
    assert edit.text() == "1024 bytes, untyped"
    # The text fits inside the field's contents (no leading characters scrolled out of view).
    inner = edit.contentsRect().width() - edit.textMargins().left() - edit.textMargins().right()
    assert edit.fontMetrics().horizontalAdvance(edit.text()) < inner
    assert edit.cursorPosition() == 0 and "1024 bytes, untyped" in edit.toolTip()


def test_a_long_summary_is_elided_at_the_inspectors_width_and_whole_in_its_tooltip(qtbot):
    """At 1366x768 the dispatch tab's inspector is ~420 px right of its tensor list: the summary line (binding,
    type, statistics) was cut mid-number at the edge ("std 0  Na"). It is elided with "…" there, the whole
    line is its text, tooltip and Copy, and the line never widens the inspector."""
    view = TensorInspector()
    qtbot.addWidget(view)
    view.resize(620, 500)
    a = np.linspace(-1, 1, 2 * 16, dtype=np.float32).reshape(2, 16)
    a[0, 3] = np.nan
    view.set_tensors([InspectedTensor("binding 0, read, input 0", a, "2x16xf32")])
    view.show()
    qtbot.waitExposed(view)
    summary = view.summary
    whole = summary.text()
    assert whole.startswith("binding 0, read, input 0: 2x16 f32") and "first non-finite at [0, 3]" in whole
    assert summary.toolTip() == whole
    shown = summary.shown_text()
    assert summary.is_elided() and shown.endswith("…") and whole.startswith(shown[:-1])
    assert summary.fontMetrics().horizontalAdvance(shown) <= summary.contentsRect().width()
    assert view.minimumSizeHint().width() < summary.fontMetrics().horizontalAdvance(whole)
    view.resize(2400, 500)
    qtbot.waitUntil(lambda: not summary.is_elided())
    assert summary.shown_text() == whole
    view.resize(620, 500)
    _shot(view, "inspector_long_summary")


def test_the_compare_controls_fit_a_narrow_inspector(qtbot):
    """At 1366x768 the inspector's Compare page is ~480 px wide: the golden file and the tolerances fit
    without a sideways scroll (in one row they needed ~700 px and the rtol field was cut)."""
    view = TensorInspector()
    qtbot.addWidget(view)
    view.set_tensors([InspectedTensor("output 0", np.ones((4, 8), np.float32), "4x8xf32")])
    view.resize(480, 500)
    view.show()
    qtbot.waitExposed(view)
    view.tabs.setCurrentIndex(view.tabs.count() - 1)
    assert view.tabs.tabText(view.tabs.currentIndex()) == "Compare"
    page = view.rtol.parentWidget()
    while page.parentWidget() is not None and page.parentWidget().objectName() != "qt_scrollarea_viewport":
        page = page.parentWidget()
    viewport = page.parentWidget()
    qtbot.waitUntil(lambda: viewport.width() > 0)
    assert page.minimumSizeHint().width() <= viewport.width(), (page.minimumSizeHint().width(), viewport.width())
