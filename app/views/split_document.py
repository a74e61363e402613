"""A split folder (``iree-lens split``) as a document: one row per test (its dispatch, how often the run
made it, the source line of its root op) and one column per build it was checked with (saved checks of
``split --check`` and the checks made here), each cell the test's verdict in the verdict colours, with the
reason or the metrics in its tooltip. **Check with…** checks every test on the engine worker with the
chosen target and adds (or refreshes) that build's column."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.views.verdict_style import UNKNOWN_COLOUR, legend_html, verdict_colour, verdict_label
from engine.compiler.targets import TARGETS
from engine.split.check import FAILED, TestVerdict, build_label, check_split, read_checks, save_check
from engine.split.splitter import MANIFEST, SplitTest, read_manifest

_ROOT = QModelIndex()
FIXED_COLUMNS = ("Test", "Runs", "Source line")


def is_split_folder(path: str | Path) -> bool:
    """A folder (or its manifest.json) that ``iree-lens split`` wrote: its manifest lists ``tests``."""
    p = Path(path)
    manifest = p / MANIFEST if p.is_dir() else p
    if manifest.name != MANIFEST or not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return False
    tests = data.get("tests") if isinstance(data, dict) else None
    return isinstance(tests, list) and all(isinstance(t, dict) and "dir" in t for t in tests)


class SplitTestsModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.tests: list[SplitTest] = []
        self.builds: dict[str, dict[str, TestVerdict]] = {}

    def set_folder(self, tests: list[SplitTest], builds: dict[str, dict[str, TestVerdict]]) -> None:
        self.beginResetModel()
        self.tests, self.builds = tests, dict(builds)
        self.endResetModel()

    def set_build(self, label: str, verdicts: dict[str, TestVerdict]) -> None:
        self.beginResetModel()
        self.builds[label] = verdicts
        self.endResetModel()

    def verdict(self, row: int, label: str) -> TestVerdict | None:
        return self.builds.get(label, {}).get(self.tests[row].dir)

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt's name)
        return 0 if parent.isValid() else len(self.tests)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(FIXED_COLUMNS) + len(self.builds)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal:
            return None
        return FIXED_COLUMNS[section] if section < len(FIXED_COLUMNS) else list(self.builds)[section - len(FIXED_COLUMNS)]

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        test, column = self.tests[index.row()], index.column()
        if column < len(FIXED_COLUMNS):
            if role == Qt.ItemDataRole.DisplayRole:
                return (test.dir, str(len(test.occurrences)), test.loc or "unknown")[column]
            if role == Qt.ItemDataRole.ToolTipRole:
                return f"{test.dispatch}" + (f"\nnot written: {test.error}" if test.error else "")
            return None
        verdict = self.verdict(index.row(), list(self.builds)[column - len(FIXED_COLUMNS)])
        if role == Qt.ItemDataRole.DisplayRole:
            if verdict is None:
                return "not checked"
            return FAILED if verdict.verdict == FAILED else verdict_label(verdict.verdict)
        if role == Qt.ItemDataRole.ForegroundRole:
            if verdict is None:
                return QBrush(UNKNOWN_COLOUR)
            return QBrush(verdict_colour("diverged" if verdict.verdict == FAILED else verdict.verdict))
        if role == Qt.ItemDataRole.ToolTipRole and verdict is not None:
            if verdict.reason:
                return verdict.reason
            return "\n".join(f"{o.get('name')}: {o.get('verdict')}, max abs {o.get('max_abs_error')}, "
                             f"max ulps {o.get('max_ulps')}" for o in verdict.outputs)  # fmt: skip
        return None


class SplitDocument(QWidget):
    """The tests of one split folder and their verdicts per build."""

    def __init__(self, folder: str | Path, worker=None, messages=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("splitDocument")
        path = Path(folder)
        self.folder = path.parent if path.name == MANIFEST else path
        self.worker = worker
        self.messages = messages
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        self.model = SplitTestsModel(self)
        self.table = QTableView(self)
        self.table.setObjectName("splitTestsTable")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.target_box = QComboBox(self)
        self.target_box.setObjectName("splitCheckTarget")
        self.target_box.addItems(list(TARGETS))
        self.check_button = QPushButton("Check with…", self)
        self.check_button.setObjectName("splitCheckButton")
        self.check_button.setToolTip("compile every test with iree-compile for the target and run it with "
                                     "iree-run-module; judge each against its expected outputs")  # fmt: skip
        self.check_button.clicked.connect(lambda: self.check(self.target_box.currentText()))
        self.check_button.setEnabled(worker is not None)
        bar = QHBoxLayout()
        bar.addWidget(self.title, 1)
        bar.addWidget(self.target_box)
        bar.addWidget(self.check_button)
        legend = QLabel(legend_html() + ' · <span style="color:#c82828">■ failed (compile or run)</span>', self)
        legend.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(self.table, 1)
        layout.addWidget(legend)
        self.reload()

    def reload(self) -> None:
        tests = read_manifest(self.folder)
        self.model.set_folder(tests, read_checks(self.folder))
        self._retitle()

    def _retitle(self, busy: str = "") -> None:
        tests = self.model.tests
        runs = sum(len(t.occurrences) for t in tests)
        text = f"{self.folder}: {len(tests)} tests from {runs} dispatches; {len(self.model.builds)} builds checked"
        self.title.setText(text + (f" — {busy}" if busy else ""))

    def check(self, target: str) -> int | None:
        """Check every test with ``target`` (a key of ``TARGETS``) on the engine worker; the build's column
        appears when it ends."""
        if self.worker is None:
            return None
        flags, device = list(TARGETS[target].flags), TARGETS[target].device
        self.check_button.setEnabled(False)
        self._retitle(f"checking with {target}…")
        return self.worker.submit(
            _check_and_save, self.folder, flags, device, tag=f"split-check:{self.folder}",
            on_result=self._on_checked, on_error=self._on_failed,
        )  # fmt: skip

    def _on_checked(self, result: tuple[str, list[TestVerdict]]) -> None:
        label, verdicts = result
        self.model.set_build(label, {v.dir: v for v in verdicts})
        self.check_button.setEnabled(True)
        bad = [v.dir for v in verdicts if not v.agrees]
        self._retitle(f"{label}: {len(bad)} diverged or failed" if bad else f"{label}: every test agrees")

    def _on_failed(self, error) -> None:
        self.check_button.setEnabled(True)
        self._retitle(f"check failed: {error.message}")
        if self.messages is not None:
            self.messages.error(f"split check: {error.message}")


def _check_and_save(folder: Path, flags: list[str], device: str) -> tuple[str, list[TestVerdict]]:
    verdicts = check_split(folder, flags, device)
    save_check(folder, flags, device, verdicts)
    return build_label(flags, device), verdicts


def open_split_document(window, path: str | Path) -> SplitDocument:
    """Open a split folder as a document of the main window (one tab per folder)."""
    document = SplitDocument(path, worker=window.worker, messages=window.messages)
    return window.open_document(document, f"Tests {document.folder.name}", key=f"split:{document.folder.resolve()}")
