"""The one table model of dispatch lists: rows by run ordinal (a live run's dispatches, a capture's), the
columns a list names, then a Verdict column; the name filter they share.

Both dispatch lists of the window (``run_dispatch_list``: the live run's, from its history; and
``dispatch_run_list``: a capture bundle's, with its tensors) show rows of dispatches that a divergence check
may have judged: a diverge breakpoint's stop or a capture compared with another run gives each dispatch a
verdict (numerics' exact / within rounding / within tolerance / diverged). The verdict is written in the
Verdict column, colours the row's text (``verdict_style``) and is named in the row's tooltip with its
metrics: never colour alone. Rows no check judged say "not compared" once any verdict is known.

Where the module's source locations are known (``set_source_lines``: export name -> the input program's
line and op IREE recorded for it), a Source column before the Verdict names each dispatch's line.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
    QTimer,
)
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHeaderView, QLineEdit, QTableView

from app.views.verdict_style import verdict_colour, verdict_label
from engine.compiler.task import TaskState

_ROOT = QModelIndex()  # the invalid parent of a flat table
VERDICT_COLUMN = "Verdict"
SOURCE_COLUMN = "Source"
PAUSED = QBrush(QColor("#fff3cd"))
FILTER_DELAY_MS = 120  # typing in a filter applies once the keys pause (each pass reads every row)
COLUMN_PADDING = 18  # pixels around a cell's text (margins and the sort arrow's room)
NAME_SHARE = 0.4  # of a table's width kept for its stretched column (the dispatch's name) when others are wide
MIN_SHARED_WIDTH = 60  # a fitted column is never narrowed below this (its header stays readable)


@dataclass(frozen=True)
class VerdictMark:
    """A dispatch's verdict as a list shows it."""

    verdict: str  # numerics' Verdict value
    summary: str = ""  # the metrics behind it (numerics' one line)
    inherited: bool = False  # diverged with inputs that already differed

    @property
    def label(self) -> str:
        return verdict_label(self.verdict, self.inherited)


def event_verdicts(event, earlier: dict[int, VerdictMark] | None = None) -> dict[int, VerdictMark] | None:
    """The verdicts a session event gives: a diverge breakpoint's stop (``Stopped.detail.divergence``: every
    dispatch it judged, the diverged one with its metrics) or the end of a run it watched
    (``Finished.verdicts``; the diverged mark of an earlier stop in ``earlier`` kept). None: the event gives
    none."""
    detail = getattr(event, "detail", None)
    divergence = getattr(detail, "divergence", None)
    if divergence is not None:
        marks = {o: VerdictMark(v) for o, v in divergence.verdicts}
        marks[divergence.ordinal] = VerdictMark(
            "diverged", divergence.summary or divergence.note or divergence.text
        )
        return marks
    verdicts = getattr(event, "verdicts", ())
    if verdicts:
        kept = {o: m for o, m in (earlier or {}).items() if m.verdict == "diverged"}
        return {**{o: VerdictMark(v) for o, v in verdicts}, **kept}
    return None


class DispatchListModel(QAbstractTableModel):
    """Dispatch rows: ``columns`` (the first two are the ordinal and IREE's export name) and the Verdict
    column. A subclass says how one of its rows reads: ``ordinal_of``, ``name_of``, ``cell``, ``tooltip_of``."""

    columns: tuple[str, ...] = ("#", "Dispatch")

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []
        self.verdicts: dict[int, VerdictMark] = {}
        self.paused: int | None = None  # the ordinal the run is paused at (marked)
        self.source_lines: dict[str, str] = {}  # export name -> "file.mlir:39 torch.aten.conv2d"
        # An export dispatched from several places -> each place's line, in program order (``source_places_job``);
        # used once ``runs_complete`` (every dispatch of the call listed), as by-source applies them.
        self.source_places: dict[str, tuple[str, ...]] = {}
        self.runs_complete = False
        self._occurrences: tuple[int, dict[int, int], dict[str, int]] | None = None

    # -- what a subclass says of its rows

    def ordinal_of(self, row) -> int:
        raise NotImplementedError

    def name_of(self, row) -> str:
        raise NotImplementedError

    def cell(self, row, column: int) -> str:
        return str(self.ordinal_of(row)) if column == 0 else self.name_of(row)

    def tooltip_of(self, row) -> str:
        return f"#{self.ordinal_of(row)} {self.name_of(row)}"

    def foreground_of(self, row, column: int) -> QBrush | None:
        return None

    # -- source lines

    def set_source_lines(self, lines: dict[str, str]) -> None:
        """Each export's source line (``{}``: unknown; the Source column is then not shown)."""
        self.beginResetModel()
        self.source_lines = dict(lines)
        self.endResetModel()

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The list's columns, Source where known, then the Verdict."""
        return (*self.columns, *((SOURCE_COLUMN,) if self.source_lines else ()), VERDICT_COLUMN)

    def set_source_places(self, places: dict[str, tuple[str, ...]], runs_complete: bool | None = None) -> None:
        """Each deduplicated export's places (``{}``: unknown), and whether the rows are every dispatch of the
        call (None: as it was)."""
        self.source_places = dict(places)
        if runs_complete is not None:
            self.runs_complete = runs_complete
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, self.columnCount() - 1))

    def source_of(self, row) -> str:
        """The row's source line: the place it was dispatched from where its export has several and the call's
        runs of it are a whole number of rounds of them (the k-th run the k-th place, as by-source places
        time), else the line the module records for the export."""
        name = self.name_of(row)
        places = self.source_places.get(name)
        if places and self.runs_complete:
            occurrence, runs = self._occurrence_of(row)
            if runs % len(places) == 0:
                k = occurrence % len(places)
                return f"{places[k]} (place {k + 1} of {len(places)})"
        return self.source_lines.get(name, "")

    def _occurrence_of(self, row) -> tuple[int, int]:
        """(how many rows of the row's export come before it, how many there are)."""
        if self._occurrences is None or self._occurrences[0] != len(self.rows):
            seen: dict[str, int] = {}
            by_ordinal: dict[int, int] = {}
            for r in self.rows:
                n = self.name_of(r)
                by_ordinal[self.ordinal_of(r)] = seen.get(n, 0)
                seen[n] = seen.get(n, 0) + 1
            self._occurrences = (len(self.rows), by_ordinal, seen)
        _, by_ordinal, seen = self._occurrences
        return by_ordinal.get(self.ordinal_of(row), 0), seen.get(self.name_of(row), 0)

    # -- verdicts

    def set_verdicts(self, verdicts: dict[int, VerdictMark]) -> None:
        """Each dispatch's verdict by ordinal (replacing any earlier ones); ``{}`` clears them."""
        self.verdicts = dict(verdicts)
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, self.columnCount() - 1))

    def verdict_of(self, ordinal: int) -> VerdictMark | None:
        return self.verdicts.get(ordinal)

    def set_paused(self, ordinal: int | None) -> None:
        old, self.paused = self.paused, ordinal
        for o in (old, ordinal):
            row = self.row_of(o) if o is not None else None
            if row is not None:
                self.dataChanged.emit(self.index(row, 0), self.index(row, self.columnCount() - 1))

    def row_of(self, ordinal: int) -> int | None:
        return next((i for i, r in enumerate(self.rows) if self.ordinal_of(r) == ordinal), None)

    def filter_key(self, row: int) -> tuple[str, str]:
        """Row ``row``'s ordinal as text and its dispatch name in lower case: what the name filter matches
        (read from the row itself, not through Qt's ``data`` twice per row per keystroke)."""
        r = self.rows[row]
        return str(self.ordinal_of(r)), self.name_of(r).lower()

    def widest_text(self, column: int) -> str:
        """The longest text column ``column`` holds (what it is sized to: every row counts, #1000 and up too)."""
        if column == self.columnCount() - 1:
            labels = [m.label for m in self.verdicts.values()] + (["not compared"] if self.verdicts else [])
            return max(labels + [VERDICT_COLUMN], key=len)
        if column == len(self.columns):  # the Source column (shown where the lines are known)
            return max([*self.source_lines.values(), SOURCE_COLUMN], key=len)
        if column == 0:
            top = max((self.ordinal_of(r) for r in self.rows), default=0)
            return max("8" * len(str(top)), self.columns[0], key=len)
        texts = [self.cell(r, column) for r in self.rows]
        return max(texts + [self.columns[column]], key=len)

    # -- Qt's model

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt's name)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.shown_columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            shown = self.shown_columns
            return shown[section] if 0 <= section < len(shown) else None
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        col = index.column()
        ordinal = self.ordinal_of(r)
        mark = self.verdicts.get(ordinal)
        if role == Qt.ItemDataRole.DisplayRole:
            if col == self.columnCount() - 1:
                if mark is not None:
                    return mark.label
                return "not compared" if self.verdicts else ""
            if col == len(self.columns):
                return self.source_of(r)
            return self.cell(r, col)
        if role == Qt.ItemDataRole.UserRole:
            return ordinal
        if role == Qt.ItemDataRole.ForegroundRole:
            own = self.foreground_of(r, col)
            if own is not None:
                return own
            if mark is not None:
                return QBrush(verdict_colour(mark.verdict, mark.inherited))
            if self.verdicts:
                return QBrush(verdict_colour(None))
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            text = self.tooltip_of(r)
            if self.source_of(r):
                text += f"\nfrom {self.source_of(r)}"
            if ordinal == self.paused:
                text += "  (the run is paused here)"
            if mark is not None:
                text += f"\nverdict: {mark.label}" + (f" — {mark.summary}" if mark.summary else "")
            elif self.verdicts:
                text += "\nverdict: not compared"
            return text
        if role == Qt.ItemDataRole.BackgroundRole and ordinal == self.paused:
            return PAUSED
        return None


class NameFilter(QSortFilterProxyModel):
    """Rows whose dispatch name contains the text (case-insensitive), matches it as a glob, or whose ordinal
    it is."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = ""

    def set_text(self, text: str) -> None:
        text = text.strip().lower()
        text = text[1:] if text.startswith("#") else text
        if text != self.text:
            self.text = text
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex) -> bool:  # noqa: N802
        number, name = self.sourceModel().filter_key(source_row)
        return name_matches(self.text, name, number)


def name_matches(text: str, name: str, number: str = "") -> bool:
    """The dispatch lists' one filter rule: ``text`` (lower case, no leading ``#``) is empty, a glob the
    lower-case ``name`` matches, a part of it, or the row's ordinal ``number``."""
    if not text:
        return True
    if any(c in text for c in "*?["):
        return fnmatch.fnmatchcase(name, text)
    return text in name or text == number


class FilterTyping(QObject):
    """A filter line applied to a ``NameFilter`` once typing pauses (``FILTER_DELAY_MS``); Enter applies it
    at once. ``apply()`` applies what the line says now (tests, a cleared line)."""

    def __init__(self, edit: QLineEdit, proxy: NameFilter, parent: QObject | None = None):
        super().__init__(parent or edit)
        self.edit, self.proxy = edit, proxy
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(FILTER_DELAY_MS)
        self.timer.timeout.connect(self.apply)
        edit.textChanged.connect(lambda text: self.apply() if not text else self.timer.start())
        edit.returnPressed.connect(self.apply)

    def apply(self) -> None:
        self.timer.stop()
        self.proxy.set_text(self.edit.text())


class ColumnFitter(QObject):
    """Sizes a dispatch table's columns from the widest text each holds (``widest_text``), once per burst of
    changes. Qt's ResizeToContents measures rows on every change (seconds per keystroke at 2,000 rows) and
    only the first 1,000 of them, so the ordinal column of #1000 and up showed "1…". A fitted column other
    than the ordinal shares what leaves the stretched one (the dispatch's name) ``NAME_SHARE`` of the table's width:
    in a 1366-px window the Source column's widest line left "main$as…" of every name."""

    def __init__(self, table: QTableView, model: DispatchListModel, stretch: int = 1, only: tuple[int, ...] = ()):
        super().__init__(table)
        self.table, self.model, self.stretch = table, model, stretch
        self.only = only  # the columns it sizes (empty: every column but the stretched one)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(0)
        self.timer.timeout.connect(self.fit)
        for signal in (model.modelReset, model.rowsInserted, model.dataChanged, model.layoutChanged):
            signal.connect(self.timer.start)
        table.viewport().installEventFilter(self)  # a resized table refits (the cap follows its width)
        self.fit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:
            self.timer.start()
        return False

    def fit(self) -> None:
        metrics = self.table.fontMetrics()
        bold = self.table.horizontalHeader().fontMetrics()
        widths: dict[int, int] = {}
        for column in range(self.model.columnCount()):
            if column == self.stretch or (self.only and column not in self.only):
                continue
            text = self.model.widest_text(column)
            widths[column] = max(metrics.horizontalAdvance(text), bold.horizontalAdvance(text)) + COLUMN_PADDING
        # The ordinal keeps its width; the others share what leaves the stretched column NAME_SHARE of the table.
        shared = [c for c in widths if c != 0]
        room = int(self.table.viewport().width() * (1 - NAME_SHARE)) - widths.get(0, 0)
        wanted = sum(widths[c] for c in shared)
        if shared and room > 0 and wanted > room:
            # Water-filling: narrow columns keep their width, the widest give up what does not fit.
            for k, c in enumerate(sorted(shared, key=lambda c: widths[c])):
                fair = room // (len(shared) - k)
                widths[c] = min(widths[c], max(MIN_SHARED_WIDTH, fair))
                room -= widths[c]
        for column, width in widths.items():
            self.table.setColumnWidth(column, width)


def source_places_job(module_path: str, task: TaskState | None = None) -> dict[str, tuple[str, ...]]:
    """Export name -> the source line of each place the program dispatches it from, in program order, for the
    exports the host code dispatches from several places (deduplicated executables): read from the flow phase
    of the input program compiled again with locations (``by_source.source_map``; a compile, kept), where the
    program is readable here; {} otherwise. Not for the engine worker: a large model's flow phase takes a
    while (transformer96: 14 s). ``task`` cancelled: the compile is killed and {} returned."""
    from engine.errors import LensError
    from engine.trace.by_source import program_op, source_map

    calls = _calls_per_export(module_path)
    if not any(n > 1 for n in calls.values()):
        return {}
    try:
        sources = source_map(module_path, task=task)  # no places where the program is not readable here
    except (LensError, OSError, ValueError, IndexError):
        return {}
    if task is not None and task.cancelled:
        return {}
    out = {}
    for export, shares_of_places in sources.sites.items():
        mains = [max(shares, key=lambda s: s.share) for shares in shares_of_places]
        labels = tuple(_short_line(m.loc, program_op(m.loc) or m.name) for m in mains)
        if calls[export] == len(labels):  # the host code's places are the flow phase's
            out[export] = labels
    return out


def source_lines_job(module_path: str, task=None) -> dict[str, str]:
    """Export name -> ``file.mlir:LINE op`` from the module's recorded export locations (runs on the
    engine worker: it reads every executable's export table). Where IREE recorded the line of the function the
    op is in (a StableHLO program's ops, inlined into a wrapper), that is said: it is no op's line. An export
    the host code dispatches from several places (IREE deduplicated their executables: an attention's q, k and v
    projections) records one place's line, so every run of it shows that line: said too."""
    from engine.trace.by_source import FUNCTION_DEFINITIONS, program_op, readable_export_locations

    calls = _calls_per_export(module_path)
    out = {}
    for export, loc in readable_export_locations(module_path)[0].items():
        op = program_op(loc)
        said = "(its function's line)" if op in FUNCTION_DEFINITIONS else op
        if calls[export] > 1:
            said = f"{said or ''} (one of its {calls[export]} places)".lstrip()
        out[export] = _short_line(loc, said)
    return out


def _calls_per_export(module_path: str) -> Counter[str]:
    """``call_sites.calls_per_export`` of the module; none where its host code cannot be walked here."""
    from engine.errors import LensError
    from engine.runtime.vmfb.call_sites import calls_per_export
    from engine.runtime.vmfb.module import open_vmfb

    try:
        return calls_per_export(open_vmfb(module_path))
    except (LensError, OSError, ValueError, IndexError):
        return Counter()


def _short_line(loc: str, said: str | None) -> str:
    """``model.mlir:39 torch.aten.conv2d``: the file's name, the line, and what is said of it."""
    path, _, line = loc.rpartition(":")
    return f"{Path(path).name}:{line}" + (f" {said}" if said else "")
