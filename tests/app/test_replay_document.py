"""Dropping an IREE HAL replay (``.ireereplay``) on the window opens its document: dispatches in queue
order (IREE's export names), host calls and objects as iree-dump-replay lists them; "Replay and capture"
replays it on the debug engine and opens the capture (the dispatch list with the tensor inspector)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication
from support import iree_dump_replay_rows, record_replay

from app.views.dispatch_run_list import DispatchRunView
from app.views.replay_document import ReplayDocument


def _drop(widget, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = QPointF(widget.rect().center())
    args = (Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, QDragEnterEvent(pos, *args))  # the QPointF form (the QPoint one is deprecated)
    QApplication.sendEvent(widget, QDropEvent(pos, *args))


def _documents(window, kind):
    return [w for w in window.documents.documents() if isinstance(w, kind)]


def test_dropped_replay_lists_its_calls_and_captures_its_dispatches(qtbot, main_window, compiled, tmp_path):
    path = record_replay(
        compiled.path("mlp", "llvm-cpu"), "main", ["2x16xf32=0.25"], tmp_path / "mlp.ireereplay"
    )
    _drop(main_window, path)
    qtbot.waitUntil(lambda: bool(_documents(main_window, ReplayDocument)), timeout=20000)
    (document,) = _documents(main_window, ReplayDocument)
    rows = iree_dump_replay_rows(path)
    operations = [r for r in rows if r.get("kind") == "operation"]
    calls = document.host_calls.model()
    assert calls.rowCount() == len(operations)
    assert [calls.rows[i][1] for i in range(calls.rowCount())] == [r["operation"] for r in operations]
    dispatches = document.dispatches.model()
    assert dispatches.rowCount() == 2
    names = [dispatches.rows[i][1] for i in range(2)]
    assert names[0].startswith("main_dispatch_0") and names[1].startswith("main_dispatch_1")

    qtbot.mouseClick(document.capture_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(_documents(main_window, DispatchRunView)), timeout=60000)
    (capture,) = _documents(main_window, DispatchRunView)
    assert [d.name for d in capture.bundle.dispatches] == names


def test_replay_document_profiles_into_the_zones_view(qtbot, main_window, compiled, tmp_path):
    path = record_replay(
        compiled.path("mlp", "llvm-cpu"), "main", ["2x16xf32=0.25"], tmp_path / "mlp.ireereplay"
    )
    main_window.open_file(path)
    qtbot.waitUntil(lambda: bool(_documents(main_window, ReplayDocument)), timeout=20000)
    (document,) = _documents(main_window, ReplayDocument)
    zones = main_window.show_panel("zones")
    qtbot.mouseClick(document.profile_button, Qt.MouseButton.LeftButton)

    def names() -> set[str]:
        trace = getattr(zones, "trace", None)
        return set() if trace is None else {trace.names.strings[int(i)] for i in trace.zones.name}

    # The profile runs on the engine worker and loads into the view when it is done: wait for the
    # replay's own zones (its scope and host calls), not just any trace.
    qtbot.waitUntil(lambda: {"execute", "device.queue_execute"} <= names(), timeout=60000)
    names = names()
    assert any(n.startswith("main_dispatch_0") for n in names)
