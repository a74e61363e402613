"""No Qt object is destroyed off the GUI thread.

A fresh-machine run once hung: the engine worker (listing Vulkan devices) crossed the cyclic
collector's threshold, and the collection destroyed PySide6 objects of an earlier window on the
worker thread while the GUI thread waited on a Qt lock. The application now collects on a GUI-thread
timer only (app/gui_gc.py) and the worker never drops the last reference to a request.
"""

from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QWidget

from app.main import make_application
from app.main_window import MainWindow


class _DestroyedOn:
    """Records the thread each watched QObject's C++ destructor ran on (direct connection)."""

    def __init__(self):
        self.threads: list[str] = []
        self.lock = threading.Lock()

    def watch(self, obj: QObject) -> None:
        obj.destroyed.connect(self._record, Qt.ConnectionType.DirectConnection)

    def _record(self, *_):
        with self.lock:
            self.threads.append(threading.current_thread().name)


def _allocate_like_a_parser(n: int = 200_000) -> int:
    """Work on the engine worker such as reading a big module: many young cycles and many containers
    that survive their first collections, which is what makes the collector run a full collection."""
    kept = []
    for i in range(n):
        a: list = [i]
        a.append(a)
        kept.append([i])
    return len(kept)


def test_the_application_collects_on_the_gui_thread_only(qapp):
    make_application()
    assert not gc.isenabled(), "automatic collection would run on whichever thread allocates"


def test_windows_closed_while_the_engine_worker_allocates_die_on_the_gui_thread(qapp, qtbot):
    destroyed = _DestroyedOn()
    rounds = 6
    for i in range(rounds):
        window = MainWindow()
        window.show()
        qtbot.waitExposed(window)
        # A widget in a reference cycle: only the cyclic collector frees it, which must happen on
        # this thread.
        orphan = QWidget()
        orphan.setObjectName(f"orphan {i}")
        orphan.self_ref = orphan
        destroyed.watch(orphan)
        del orphan
        done = []
        window.worker.submit(_allocate_like_a_parser, on_result=done.append)
        window.worker.submit(_allocate_like_a_parser, on_result=done.append)
        qtbot.waitUntil(lambda done=done: len(done) == 2, timeout=60_000)
        window.close()
        window.deleteLater()
        del window
        qapp.processEvents()
    gc.collect()
    qapp.processEvents()
    assert len(destroyed.threads) == rounds, "every orphaned widget was collected"
    assert set(destroyed.threads) == {threading.main_thread().name}


def test_the_worker_never_drops_the_last_reference_to_a_job(qapp, qtbot):
    """A job's function may hold a widget (a bound method, a closure): once its result is delivered
    on the GUI thread, the widget must die there, not when the worker moves on to the next job."""
    from app.workers import EngineWorker

    destroyed = _DestroyedOn()
    worker = EngineWorker()
    try:
        for _ in range(3):
            holder = QObject()
            destroyed.watch(holder)
            done = []
            worker.submit(lambda h=holder: h.objectName(), on_result=done.append)
            del holder
            qtbot.waitUntil(lambda done=done: bool(done), timeout=10_000)
            done2 = []
            worker.submit(lambda: 0, on_result=done2.append)  # the worker takes its next request
            qtbot.waitUntil(lambda done2=done2: bool(done2), timeout=10_000)
            qapp.processEvents()
        gc.collect()
        assert len(destroyed.threads) == 3
        assert set(destroyed.threads) == {threading.main_thread().name}
    finally:
        worker.shutdown()
