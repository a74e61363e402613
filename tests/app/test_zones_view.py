"""The zones view: zoom and pan (Tracy's keys, wheel), culling, select (context follows a dispatch),
statistics with histogram, find, compare, and opening files (good and bad) on the worker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from support.app import save_screenshot

from app.context import LensContext
from app.views.zones_timeline import ROW_HEIGHT
from app.views.zones_view import ZonesCompareView, ZonesView
from engine.trace.chrome import write_chrome_json
from engine.trace.model import TraceBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))



def big_trace(n_per_track: int = 100_000, tracks: int = 3, seed: int = 0):
    """Flat dispatch-like zones plus a parent zone per 100 of them, on a few tracks."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder("synthetic")
    for name in ("dispatch_a", "dispatch_b", "dispatch_c", "batch"):
        b.names.intern(name)
    cat = b.categories.intern("dispatch")
    for t in range(tracks):
        tid = b.track(("t", t), f"queue {t}", "queue")
        dur = rng.integers(200, 2000, n_per_track)
        gap = rng.integers(10, 500, n_per_track)
        start = np.cumsum(dur + gap) - dur
        end = start + dur
        b.add_zone_arrays(
            start, end, np.full(n_per_track, tid), rng.integers(0, 3, n_per_track), np.full(n_per_track, cat)
        )
        g = np.arange(0, n_per_track, 100)
        last = np.minimum(g + 99, n_per_track - 1)
        b.add_zone_arrays(start[g], end[last], np.full(len(g), tid), np.full(len(g), 3))
    return b.build()


def small_trace():
    b = TraceBuilder("small.json")
    vm = b.track(("vm",), "VM", "vm")
    dev = b.track(("dev",), "device local-sync", "device")
    b.add_zone(0, 10_000, vm, "main", "vm call")
    b.add_zone(1_000, 9_000, vm, "hal.device.queue.execute", "import")
    b.add_zone(1_000, 9_000, dev, "command buffer", "queue")
    for k in range(3):
        s = 1_500 + k * 2_500
        b.add_zone(
            s,
            s + 2_000,
            dev,
            f"main_dispatch_{k}",
            "dispatch",
            {"ordinal": k, "workgroup_count": [k + 1, 1, 1]},
        )
    b.add_instant(9_500, dev, "fence signaled")
    return b.build()


@pytest.fixture
def view(qtbot):
    v = ZonesView()
    qtbot.addWidget(v)
    v.resize(1100, 700)
    v.show()
    qtbot.waitExposed(v)
    yield v
    v.shutdown()


def _click_zone(qtbot, timeline, index: int) -> None:
    item = timeline.item
    z = item.trace.zones
    x = (int(z.start[index]) + int(z.end[index])) / 2 - item.origin
    y = float(item.rows.rows(z.track[index : index + 1], z.depth[index : index + 1])[0]) + ROW_HEIGHT / 2
    scene = item.mapToScene(QPointF(x, y))
    pos = timeline.mapFromScene(scene)
    qtbot.mouseClick(timeline.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_zoom_pan_keys_and_culling(view, qtbot):
    trace = big_trace()
    view.set_trace(trace)
    tl = view.timeline
    qtbot.wait(50)
    full = tl.x_range()
    save_screenshot(tl, "zones_full")
    item = tl.item
    # Full zoom-out: 300k zones are drawn as a bounded number of boxes, most of them merged runs.
    assert 0 < item.painted_count < 20_000 and item.merged_count > 0
    tl.setFocus()
    qtbot.keyClick(tl, Qt.Key.Key_W)
    x0, x1 = tl.x_range()
    assert (x1 - x0) == pytest.approx((full[1] - full[0]) * 0.8, rel=1e-3)
    before = tl.x_range()
    qtbot.keyClick(tl, Qt.Key.Key_D)
    after = tl.x_range()
    assert after[0] - before[0] == pytest.approx((before[1] - before[0]) * 0.1, rel=1e-3)
    qtbot.keyClick(tl, Qt.Key.Key_A)
    qtbot.keyClick(tl, Qt.Key.Key_S)
    assert tl.x_range()[1] - tl.x_range()[0] == pytest.approx(full[1] - full[0], rel=1e-2)
    # Wheel at the cursor zooms in and keeps the time under the cursor in place.
    vb = tl.getViewBox()
    tl.zoom(1e-4, center=5_000_000)
    qtbot.wait(50)
    tl.repaint()
    assert item.painted_count < 200 and item.merged_count == 0  # deep zoom: single zones with labels
    save_screenshot(tl, "zones_deep")
    c = vb.mapViewToScene(QPointF(5_000_000, 0.5))
    pos = tl.mapFromScene(c)
    r0 = tl.x_range()
    from PySide6.QtCore import QPoint as _P
    from PySide6.QtGui import QWheelEvent

    ev = QWheelEvent(
        QPointF(pos), QPointF(tl.mapToGlobal(pos)), _P(0, 0), _P(0, 120),
        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False,
    )  # fmt: skip
    from PySide6.QtWidgets import QApplication

    QApplication.sendEvent(tl.viewport(), ev)
    r1 = tl.x_range()
    assert (r1[1] - r1[0]) < (r0[1] - r0[0])
    under = vb.mapSceneToView(c).x()
    assert abs(under - 5_000_000) < (r1[1] - r1[0]) * 0.02


def test_select_dispatch_moves_context_and_statistics(qtbot):
    context = LensContext()
    v = ZonesView(context=context)
    qtbot.addWidget(v)
    v.resize(1000, 600)
    v.show()
    qtbot.waitExposed(v)
    trace = small_trace()
    v.set_trace(trace)
    qtbot.wait(50)
    target = int(
        np.flatnonzero(np.asarray([trace.names[i] for i in trace.zones.name]) == "main_dispatch_1")[0]
    )
    with qtbot.waitSignal(v.zoneSelected, timeout=2000) as sig:
        _click_zone(qtbot, v.timeline, target)
    info = sig.args[0]
    assert info.name == "main_dispatch_1" and info.args["ordinal"] == 1
    assert context.dispatch == "main_dispatch_1"  # IREE's name: what the compile-side views follow
    # The statistics row of the selected name is selected and its histogram drawn.
    row = v.table.currentIndex()
    assert v.proxy.index(row.row(), 0).data() == "main_dispatch_1"
    counts, edges = v.show_histogram("main_dispatch_1")
    assert counts.sum() == 1 and edges[0] <= 2000 <= edges[-1]
    # Hover text names the zone with its arguments.
    assert "workgroup_count: [2, 1, 1]" in v.timeline.item.describe(target)
    save_screenshot(v, "zones_select")
    v.shutdown()


def test_statistics_table_find_and_histogram(view, qtbot):
    trace = big_trace(20_000, 2, seed=3)
    view.set_trace(trace)
    names = {view.proxy.index(r, 0).data() for r in range(view.proxy.rowCount())}
    assert names == {"dispatch_a", "dispatch_b", "dispatch_c", "batch"}
    # Sorted by total, largest first (the batch zones enclose everything).
    assert view.proxy.index(0, 0).data() == "batch"
    counts, _ = view.show_histogram("dispatch_b")
    expected = int((trace.zones.name == trace.names.id_of("dispatch_b")).sum())
    assert counts.sum() == expected
    view.find_edit.setText("disp")
    assert view.proxy.rowCount() == 3
    first = view.find("dispatch_c")
    second = view.find("dispatch_c")
    assert first.name == second.name == "dispatch_c" and second.start_ns > first.start_ns
    x0, x1 = view.timeline.x_range()
    assert (
        x0 <= second.start_ns - view.timeline.item.origin and x1 >= second.end_ns - view.timeline.item.origin
    )
    assert view.timeline.item.selected == second.index
    view.find_edit.setText("")
    qtbot.wait(20)
    save_screenshot(view, "zones_stats")


def test_compare_traces_slower_first(qtbot):
    def trace(scale: dict):
        b = TraceBuilder(f"{scale}")
        t = b.track(("c",), "iree-compile", "compiler")
        at = 0
        for name, (n, d) in scale.items():
            for _ in range(n):
                b.add_zone(at, at + d, t, name, "pass")
                at += d
        return b.build()

    a = trace({"canonicalize": (10, 1000), "cse": (5, 400), "inline": (1, 5000)})
    b = trace({"canonicalize": (10, 3000), "cse": (5, 300), "inline": (1, 5000), "new-pass": (2, 100)})
    v = ZonesCompareView()
    qtbot.addWidget(v)
    v.resize(1100, 600)
    v.show()
    diffs = v.set_traces(a, b)
    assert v.top_names(2) == ["canonicalize", "new-pass"]
    d = {x.name: x for x in diffs}
    assert d["canonicalize"].total_diff_ns == 20_000 and d["cse"].total_diff_ns == -500
    v.table.selectRow(0)
    assert v.a.item.highlight_name == a.names.id_of("canonicalize")
    save_screenshot(v, "zones_compare")


def test_compile_ab_real_timing(qtbot, tmp_path):
    from support import iree_compile

    from engine.samples import sample_path
    from engine.trace.open import load_trace

    traces = []
    for k, sample in enumerate(("matmul", "mlp")):
        proc = iree_compile(
            [str(sample_path(sample)), "--iree-hal-target-device=local",
             "--iree-hal-local-target-device-backends=llvm-cpu", "--mlir-timing", "--mlir-output-format=json",
             "-o", str(tmp_path / f"{k}.vmfb")],
            text=True, check=True,
        )  # fmt: skip
        (tmp_path / f"{k}.txt").write_text(proc.stderr)
        traces.append(load_trace(tmp_path / f"{k}.txt"))
    v = ZonesCompareView()
    qtbot.addWidget(v)
    v.resize(1200, 700)
    v.show()
    diffs = v.set_traces(*traces)
    shown = v.top_names(len(diffs))
    by_name = {d.name: d.total_diff_ns for d in diffs}
    assert [by_name[n] for n in shown] == sorted(by_name.values(), reverse=True)
    save_screenshot(v, "zones_compile_ab")


def test_open_files_on_the_worker(view, qtbot, tmp_path):
    good = tmp_path / "t.json"
    write_chrome_json(small_trace(), good)
    with qtbot.waitSignal(view.traceLoaded, timeout=10_000):
        view.open_path(good)
    assert len(view.trace.zones) == 6 and not view.progress.isVisible()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a"}]}))
    with qtbot.waitSignal(view.loadFailed, timeout=10_000) as sig:
        view.open_path(bad)
    assert "event 0" in sig.args[0]
    assert view.error.isVisible() and len(view.trace.zones) == 6  # the good trace stays


def test_zones_panel_in_the_main_window(make_main_window, qtbot, tmp_path):
    """The panel factory on the window's services: opens on the window's worker, moves its context."""
    from app.panels import PANELS, PanelSpec, register_panel

    register_panel(PanelSpec("zones-test", "Zones", "app.views.zones_view:zones_panel", area="bottom"))
    try:
        window = make_main_window()
    finally:
        PANELS[:] = [p for p in PANELS if p.id != "zones-test"]
    view = window.panels["zones-test"]
    assert isinstance(view, ZonesView) and view.context is window.context
    path = tmp_path / "t.json"
    write_chrome_json(small_trace(), path)
    with qtbot.waitSignal(view.traceLoaded, timeout=10_000):
        view.open_path(path)
    view.resize(900, 500)
    qtbot.wait(50)
    trace = view.trace
    target = int(
        np.flatnonzero(np.asarray([trace.names[i] for i in trace.zones.name]) == "main_dispatch_2")[0]
    )
    with qtbot.waitSignal(window.context.dispatchChanged, timeout=2000):
        view.timeline.item.select(target)
    assert window.context.dispatch == "main_dispatch_2"


def test_a_histogram_of_three_zones_shows_each_inside_its_axis(view):
    b = TraceBuilder("three.json")
    b.names.intern("main$async_dispatch_12_conv_2d_nchw_fchw_1x64x56x56x3x3x3_f32")
    track = b.track(("q",), "queue", "queue")
    durations = np.array([268_800, 269_300, 272_400])  # ns
    start = np.array([0, 1_000_000, 2_000_000])
    b.add_zone_arrays(start, start + durations, np.full(3, track), np.zeros(3, np.int64))
    view.set_trace(b.build())
    name = "main$async_dispatch_12_conv_2d_nchw_fchw_1x64x56x56x3x3x3_f32"
    counts, edges = view.show_histogram(name)
    assert counts.sum() == 3 and (counts > 0).sum() >= 2
    (x0, x1), _ = view.histogram.getViewBox().viewRange()
    assert x0 <= durations.min() * 1e-9 and durations.max() * 1e-9 <= x1  # the longest inside the axis
    assert view.proxy.index(0, 0).data(Qt.ItemDataRole.ToolTipRole) == name


def test_a_number_cut_by_the_tables_edge_is_drawn_elided(qtbot):
    """The statistics scroll sideways in a 1366-px window: the right-aligned number the edge cuts showed its
    first digits only ("906" of "906.99 µs", "1" of "150 ns"). It is drawn elided in its visible part."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.views.zones_by_source import CutCellsElided
    from app.views.zones_view import StatsModel, stats_table
    from engine.trace.stats import ZoneStats

    model = StatsModel()
    model.set_rows([ZoneStats("execute", 1, 906990.0, 229100.0, 906990.0, 150.0, 906990.0, 906990.0, 906990.0, 906990.0)])
    view, _ = stats_table(model)
    qtbot.addWidget(view)
    view.resize(640, 120)
    view.show()
    qtbot.waitExposed(view)
    delegate = view.itemDelegate()
    assert isinstance(delegate, CutCellsElided)
    edge = view.viewport().rect().right()
    cells = [view.visualRect(view.model().index(0, c)) for c in range(model.columnCount())]
    cut = next(c for c, r in enumerate(cells) if r.left() <= edge < r.right())
    whole = cut - 1
    for column, expect_cut in ((cut, True), (whole, False)):
        option = QStyleOptionViewItem()
        option.rect = cells[column]
        option.textElideMode = Qt.TextElideMode.ElideMiddle
        drawn = delegate.clipped(option)
        assert (drawn.rect.right() <= edge and drawn.textElideMode == Qt.TextElideMode.ElideRight) is expect_cut
        assert (drawn.rect == cells[column]) is not expect_cut


def test_a_long_name_is_elided_above_the_histogram_which_stays_inside_its_pane(view, qtbot):
    """In a 1366-px window the histogram pane is ~220 px: the name as the plot's own title (a LabelItem as wide
    as its text) widened the plot past its pane, cutting the name at both ends and the duration axis. The
    name is elided to the pane above the plot, whole in its tooltip, and the plot fits its widget."""
    name = "main$async_dispatch_2_matmul_like_16x96x32_f32_with_a_long_tail_of_words"
    b = TraceBuilder("long.json")
    track = b.track(("q",), "queue", "queue")
    for k in range(4):
        b.add_zone(k * 1_000, k * 1_000 + 500 + 100 * k, track, name, "dispatch")
    view.set_trace(b.build())
    view.resize(900, 600)
    from PySide6.QtWidgets import QSplitter

    lower = view.histogram.parentWidget()
    while not isinstance(lower, QSplitter):
        lower = lower.parentWidget()
    lower.setSizes([680, 220])
    qtbot.waitUntil(lambda: view.histogram.width() <= 240)
    view.show_histogram(name)
    qtbot.wait(50)
    plot = view.histogram.plotItem
    assert plot.titleLabel.isVisible() is False or not plot.titleLabel.text  # no title inside the plot
    assert plot.geometry().width() <= view.histogram.viewport().width() + 1
    title = view.histogram_title
    assert title.text() == name and title.toolTip() == name
    assert title.is_elided() and "…" in title.shown_text()
    assert title.fontMetrics().horizontalAdvance(title.shown_text()) <= title.width()
    save_screenshot(view, "zones_histogram_long_name")


def test_hal_profile_tracks_are_named_by_device_and_queue_as_iree_names_them():
    """IREE's HAL profile tracks were labelled "queue 0.0" and "host execution 0.0" (physical device and queue
    ordinals, unexplained). They are named as iree-profile names them (device[0], queue[0]) with the HAL device
    the profile was taken on, or a plain statement that the profile does not name it."""
    from app.views.zones_timeline import track_label
    from engine.trace.ireeprof import trace_from_jsonl_rows

    rows = [
        {"record_type": "queue_event", "op": "execute", "physical_device_ordinal": 0, "queue_ordinal": 1,
         "host_time_ns": 100},
        {"record_type": "host_execution_event", "op": "execute", "physical_device_ordinal": 0, "queue_ordinal": 1,
         "start_host_time_ns": 110, "end_host_time_ns": 900},
    ]  # fmt: skip
    trace = trace_from_jsonl_rows(rows, "x.ireeprof")
    names = {t.name for t in trace.tracks}
    assert names == {"queue operations, queue[1]", "host execution, queue[1]"}
    labels = [track_label(trace, t) for t in trace.tracks]
    assert all(label.endswith("\ndevice[0], device not named") for label in labels)
    trace.metadata["device"] = "local-sync"
    assert track_label(trace, trace.tracks[1]) == "host execution, queue[1]\nlocal-sync device[0]"


def test_one_zone_gets_a_readable_axis_and_whole_counts(view, qtbot):
    """A name seen once (one duration): its axis spans a fifth of the value around it, not the 1-ns bin whose
    ticks printed ten digits each on top of one another; the count axis ticks whole numbers; before any name
    is chosen the pane says what it is for, and a new trace clears the last one's bars."""
    b = TraceBuilder("one.json")
    track = b.track(("q",), "queue", "queue")
    b.add_zone(0, 3_946_300, track, "once", "dispatch")
    for k in range(7):
        b.add_zone(5_000_000 + k * 1_000, 5_000_000 + k * 1_000 + 400, track, "often", "dispatch")
    view.set_trace(b.build())
    assert "select a name in the table" in view.histogram_title.text()
    view.show_histogram("once")
    (x_lo, x_hi), (_, y_hi) = view.histogram.viewRange()
    assert x_lo < 3.9463e-3 < x_hi and x_hi - x_lo >= 0.2 * 3.9463e-3, (x_lo, x_hi)
    ticks = view.histogram.getAxis("left").tickValues(0, y_hi, 200)
    assert all(float(v).is_integer() for _, values in ticks for v in values), ticks
    view.show_histogram("often")
    ticks = view.histogram.getAxis("left").tickValues(0, view.histogram.viewRange()[1][1], 200)
    assert all(float(v).is_integer() for _, values in ticks for v in values), ticks
    view.set_trace(b.build())
    import pyqtgraph as pg

    assert not [i for i in view.histogram.plotItem.items if isinstance(i, pg.BarGraphItem)]
    assert "select a name in the table" in view.histogram_title.text()


def test_a_narrow_statistics_table_shows_its_times_beside_the_names(view, qtbot):
    """At 1366x768 the statistics pane is ~370 px: the name column takes a share of it, so the count and the
    total time show beside the names (a fixed 240-px name left the count alone, every time scrolled away)."""
    b = TraceBuilder("names.json")
    track = b.track(("q",), "queue", "queue")
    for k in range(3):
        b.add_zone(k * 1_000, k * 1_000 + 500, track, f"attention_block$async_dispatch_{k}_matmul_like_1x8x64x32_f32",
                   "dispatch")  # fmt: skip
    view.set_trace(b.build())
    view.show()
    view.table.resize(370, 200)
    qtbot.waitUntil(lambda: view.table.viewport().width() < 380)
    header = view.table.horizontalHeader()
    visible = [c for c in range(header.count()) if header.sectionViewportPosition(c) + header.sectionSize(c)
               <= view.table.viewport().width()]  # fmt: skip
    assert len(visible) >= 3, [header.sectionSize(c) for c in range(header.count())]
    assert header.sectionSize(0) >= 120


def test_a_long_dispatch_name_keeps_its_number_in_a_narrow_column(qtbot):
    from PySide6.QtGui import QStandardItem, QStandardItemModel
    from PySide6.QtWidgets import QStyleOptionViewItem, QTableView

    from app.views.zones_by_source import CutCellsElided

    name = "main$async_dispatch_33_conv_256x13x13x64x3x3_f32"
    model = QStandardItemModel()
    model.appendRow([QStandardItem(name), QStandardItem("zone")])
    table = QTableView()
    qtbot.addWidget(table)
    table.setModel(model)
    delegate = CutCellsElided(table)
    table.setItemDelegate(delegate)

    def shown(width: int) -> str:
        option = QStyleOptionViewItem()
        option.initFrom(table)
        option.rect.setWidth(width)
        delegate.initStyleOption(option, model.index(0, column))
        return option.text

    column = 0
    assert shown(2000) == name  # room for it all: as it is
    assert shown(120) == "…dispatch_33_conv_256x13x13x64x3x3_f32"  # then cut at its end by the view
    column = 1
    assert shown(10) == "zone"  # not a dispatch name: the view's own eliding


def test_a_zone_label_never_runs_past_its_box(qtbot):
    # Labels were cut to a count of average-width characters: capitals and wide letters ran into the next
    # zone's label (EfficientViT's compile zones: "'hal.exe" over "Translat..." at 1366x768).
    from PySide6.QtGui import QFont, QFontMetrics

    from app.views.zones_timeline import label_in_box

    metrics = QFontMetrics(QFont())
    for label in ("WWWWWWWWWWWWWWWWWWWW", "TranslateTargetExecutableVariantsPass", "'hal.executable.variant' Pipeline"):
        for width in (40, 61, 97, 150, 400):
            text = label_in_box(metrics, label, width)
            assert metrics.horizontalAdvance(text) <= width - 6, (label, width, text)
            assert text == label or text.endswith("…")
    assert label_in_box(metrics, "mlp", 400) == "mlp"
