"""An IREE HAL replay (``.ireereplay``) as a document: its host calls, objects, executables and the
dispatches in the order the queue ran them, and a button that replays it on the debug engine and opens
the capture (the dispatch list with the tensor inspector).

The replay is read on the engine worker (``describe``); the document only shows rows of plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTableView, QTabWidget, QVBoxLayout, QWidget

from engine.replay.model import ReplayDescription
from engine.temp_caches import scratch_dir


@dataclass(frozen=True)
class HostCall:
    record: int
    operation: str
    object: str
    scope: str
    status: str


@dataclass
class ReplayListing:
    """What the document shows, made on the worker from the file."""

    path: Path
    description: ReplayDescription
    host_calls: list[HostCall]


def describe(path: str | Path) -> ReplayListing:
    """Read ``path`` (on the engine worker): the description and one row per host call."""
    from engine.replay.model import describe_replay
    from engine.replay.payloads import ScopePayload
    from engine.replay.reader import open_replay

    replay = open_replay(path)
    description = describe_replay(replay)
    scopes: list[str] = []
    calls = []
    for r in replay.records():
        if r.kind != "operation":
            continue
        if r.operation == "replay.scope_end" and scopes:
            scopes.pop()
        scope = scopes[-1] if scopes else ""
        if r.operation == "replay.scope_begin" and r.status_code == 0:
            scopes.append(replay.decode_as(r, ScopePayload).name)
        target = f"{r.object_type_name} {r.object_id}" if r.object_id else ""
        calls.append(HostCall(r.sequence_ordinal, r.operation, target, scope, r.status))
    return ReplayListing(Path(path), description, calls)


_ROOT = QModelIndex()


class _Rows(QAbstractTableModel):
    def __init__(self, headers: list[str], rows: list[tuple], parent=None):
        super().__init__(parent)
        self.headers = headers
        self.rows = rows

    def rowCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=_ROOT) -> int:  # noqa: N802 (Qt)
        return len(self.headers)

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and index.isValid():
            return str(self.rows[index.row()][index.column()])
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802 (Qt)
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.headers[section]
        return None


def _table(headers: list[str], rows: list[tuple], name: str) -> QTableView:
    view = QTableView()
    view.setObjectName(name)
    view.setModel(_Rows(headers, rows, view))
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.horizontalHeader().setStretchLastSection(True)
    view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
    return view


class ReplayDocument(QWidget):
    """Tabs of a replay: Dispatches, Host calls, Objects, Executables; ``captureRequested`` asks the
    window to replay it on the debug engine and open the capture."""

    captureRequested = Signal(str)
    profileRequested = Signal(str)

    def __init__(self, listing: ReplayListing, parent: QWidget | None = None):
        super().__init__(parent)
        self.listing = listing
        d = listing.description
        layout = QVBoxLayout(self)
        head = QHBoxLayout()
        scopes = ", ".join(name for name, _, _ in d.scopes) or "none"
        self.summary = QLabel(
            f"IREE HAL replay v{d.version[0]}.{d.version[1]} — {d.record_count} records, "
            f"{len(d.objects)} objects, {len(d.executables)} executables, {len(d.dispatches)} dispatches; "
            f"scopes: {scopes}"
        )
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.summary, 1)
        self.capture_button = QPushButton("Replay and capture")
        self.capture_button.setToolTip(
            "Replay on the debug engine (local-sync) and open every dispatch's tensors in the dispatch list"
        )
        self.capture_button.clicked.connect(lambda: self.captureRequested.emit(str(listing.path)))
        head.addWidget(self.capture_button)
        self.profile_button = QPushButton("Replay and profile")
        self.profile_button.setToolTip(
            "Replay on the debug engine and open its timing zones (scopes, host calls, dispatches)"
        )
        self.profile_button.clicked.connect(lambda: self.profileRequested.emit(str(listing.path)))
        head.addWidget(self.profile_button)
        layout.addLayout(head)
        self.tabs = QTabWidget()
        self.dispatches = _table(
            ["#", "dispatch", "workgroups", "executable", "record", "scope"],
            [
                (x.index, x.name, "x".join(map(str, x.workgroup_count)), x.executable_id, x.record, x.scope)
                for x in d.dispatches
            ],
            "replayDispatches",
        )
        self.host_calls = _table(
            ["record", "host call", "object", "scope", "status"],
            [(c.record, c.operation, c.object, c.scope, c.status) for c in listing.host_calls],
            "replayHostCalls",
        )
        self.objects = _table(
            ["id", "type", "record", "scope", "details"],
            [
                (o.object_id, o.type, o.record, o.scope, ", ".join(f"{k}={v}" for k, v in o.details.items()))
                for o in d.objects
            ],
            "replayObjects",
        )
        self.executables = _table(
            ["id", "format", "bytes", "functions"],
            [(x.object_id, x.format, x.data.length, ", ".join(x.functions)) for x in d.executables],
            "replayExecutables",
        )
        self.tabs.addTab(self.dispatches, f"Dispatches ({len(d.dispatches)})")
        self.tabs.addTab(self.host_calls, f"Host calls ({len(listing.host_calls)})")
        self.tabs.addTab(self.objects, f"Objects ({len(d.objects)})")
        self.tabs.addTab(self.executables, f"Executables ({len(d.executables)})")
        layout.addWidget(self.tabs, 1)


def _capture(path: str) -> Path:
    """Replay ``path`` on the debug engine (local-sync) into a capture bundle beside the user's state."""

    from engine.replay.capture import capture_replay

    out = scratch_dir(f"lens-replay-{Path(path).stem}-")
    return capture_replay(path, out).directory


def open_replay_document(window, path: Path) -> int:
    """Read ``path`` on ``window``'s engine worker, then open its document (``MainWindow.open_file`` hands
    ``.ireereplay`` files here); errors go to the window's messages. Returns the request id."""

    def opened(listing: ReplayListing) -> None:
        document = ReplayDocument(listing)
        document.captureRequested.connect(lambda p: _start_capture(window, p))
        document.profileRequested.connect(lambda p: _start_profile(window, p))
        window.open_document(document, f"Replay {path.name}", f"replay:{Path(path).resolve()}")
        window.messages.info(f"opened {path} ({len(listing.description.dispatches)} dispatches)")

    return window.worker.submit(
        describe,
        path,
        tag="replay",
        on_result=opened,
        on_error=lambda err: window.messages.error(f"Cannot open {path.name}: {err.message}", err.details),
    )


def _start_capture(window, path: str) -> None:
    from app.views.dispatch_run_list import open_bundle_document

    window.messages.info(f"replaying {Path(path).name} on the debug engine...")
    window.worker.submit(
        _capture,
        path,
        tag="replay-capture",
        on_result=lambda directory: open_bundle_document(window.open_document, directory),
        on_error=lambda err: window.messages.error(
            f"Cannot replay {Path(path).name}: {err.message}", err.details
        ),
    )


def _profile(path: str) -> Path:
    """Zones of the replay on the debug engine, written as Chrome trace JSON for the zones view."""

    from engine.replay.profile import profile_replay
    from engine.trace.chrome import write_chrome_json

    out = scratch_dir(f"lens-replay-{Path(path).stem}-") / "zones.json"
    write_chrome_json(profile_replay(path, "local-sync"), out)
    return out


def _start_profile(window, path: str) -> None:
    window.worker.submit(
        _profile,
        path,
        tag="replay-profile",
        on_result=lambda trace: window.show_panel("zones").open_path(trace),
        on_error=lambda err: window.messages.error(
            f"Cannot profile {Path(path).name}: {err.message}", err.details
        ),
    )
