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
