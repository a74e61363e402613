"""The zones' statistics tables in a 1366x768 window: a count column as wide as a count, not as a time."""

from __future__ import annotations

from app.views.zones_view import DiffModel, StatsModel, stats_table


def test_count_columns_are_as_wide_as_a_count(qtbot):
    """Walk, squeezenet profiled at 1366x768: the statistics pane (~370 px) showed name, an 88-px count of "1"
    and total; self, mean and the rest behind the scroll bar."""
    for model, counts in ((StatsModel(), [1]), (DiffModel(), [1, 2])):
        view, _proxy = stats_table(model)
        qtbot.addWidget(view)
        header = view.horizontalHeader()
        for column in counts:
            title = model.COLUMNS[column]
            width = header.sectionSize(column)
            assert header.fontMetrics().horizontalAdvance(title) < width < 88, (title, width)
            assert view.fontMetrics().horizontalAdvance("9,999,999") < width
        assert header.sectionSize(counts[-1] + 1) == 88  # a time keeps its width ("296.117 ms" whole)


def test_the_histogram_hint_reads_from_its_start_and_a_name_keeps_its_ends(qtbot):
    """Walk at 1366x768: the histogram's hint read "Durations: selec…ame in the table" (elided in the middle,
    as a zone name is)."""
    from PySide6.QtCore import Qt

    from app.views.zones_view import ZonesView
    from engine.trace.model import TraceBuilder

    view = ZonesView()
    qtbot.addWidget(view)
    b = TraceBuilder("one.json")
    track = b.track(("q",), "queue", "queue")
    b.add_zone(0, 1_000, track, "main$async_dispatch_33_conv_2d_nchw_fchw_1x64x55x55x16x1x1_f32", "dispatch")
    view.set_trace(b.build())
    title = view.histogram_title
    assert title.mode == Qt.TextElideMode.ElideRight and title.text().startswith("Durations")
    view.show_histogram("main$async_dispatch_33_conv_2d_nchw_fchw_1x64x55x55x16x1x1_f32")
    assert title.mode == Qt.TextElideMode.ElideMiddle
