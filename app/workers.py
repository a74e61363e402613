"""One engine worker: long work runs off the GUI thread, results come back as signals on it.

Requests wait in one queue and run one at a time on a single thread (RenderDoc's
``ReplayManager::AsyncInvoke``). A request may carry a *tag*: a newer request with the same tag drops
the older one that is still queued (scrubbing or clicking fast sends many; only the last matters) and
asks the running one with that tag to cancel through its :class:`TaskState`.

Jobs are plain functions; a job that wants progress or cancellation takes a keyword argument
``task`` (a :class:`TaskState`). Tests can call the same functions synchronously.
"""

from __future__ import annotations

import inspect
import itertools
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine.compiler.task import Progress, TaskState
from engine.errors import CompileCancelled

__all__ = ["Cancelled", "EngineWorker", "TaskState", "WorkError", "WorkProgress", "WorkResult"]


# One TaskState for the whole program: the engine's (a compile job and a worker job see the same object).
# A job stops by raising CompileCancelled (TaskState.check does); the worker then drops its result.
Cancelled = CompileCancelled


@dataclass(frozen=True)
class WorkResult:
    request_id: int
    tag: str | None
    value: Any


@dataclass(frozen=True)
class WorkError:
    """A job that raised: ``message`` is what the user reads; ``details`` is the traceback."""

    request_id: int
    tag: str | None
    message: str
    details: str
    exception: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True)
class WorkProgress:
    request_id: int
    tag: str | None
    fraction: float
    text: str


@dataclass
class _Request:
    request_id: int
    tag: str | None
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    task: TaskState
    on_result: Callable[[Any], None] | None
    on_error: Callable[[WorkError], None] | None


def _progress_text(progress: Progress) -> str:
    if progress.message or progress.phase is None:
        return progress.message
    return f"phase {progress.phase_index}/{progress.phases_total}: {progress.phase}"


def _error_message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    from engine.errors import LensError

    # The engine's typed errors already say what and where; anything else gets its type named.
    return text if isinstance(exc, LensError) else f"{type(exc).__name__}: {text}"


class EngineWorker(QObject):
    """The single background worker of the application.

    ``submit`` returns a request id. Signals are emitted from the worker thread and, as this object
    lives on the GUI thread, Qt delivers them there (queued). ``on_result``/``on_error`` callbacks
    run on the GUI thread too.
    """

    started = Signal(object)  # (request_id, tag)
    resultReady = Signal(object)  # WorkResult
    failed = Signal(object)  # WorkError
    progressed = Signal(object)  # WorkProgress
    dropped = Signal(object)  # (request_id, tag): superseded before it ran
    idle = Signal()  # the queue is empty and nothing runs

    def __init__(self, parent: QObject | None = None, name: str = "lens-engine-worker"):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._running: _Request | None = None
        self._callbacks: dict[int, _Request] = {}
        self._stopping = False
        self.resultReady.connect(self._deliver_result)
        self.failed.connect(self._deliver_error)
        self.dropped.connect(self._forget)
        # A daemon thread: a job stuck in native code cannot keep the process alive at exit.
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # -- GUI-thread API ------------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        tag: str | None = None,
        on_result: Callable[[Any], None] | None = None,
        on_error: Callable[[WorkError], None] | None = None,
        **kwargs: Any,
    ) -> int:
        request_id = next(self._ids)
        task = TaskState(
            on_progress=lambda p, rid=request_id: self.progressed.emit(
                WorkProgress(rid, tag, p.phase_index / p.phases_total if p.phases_total else 0.0, _progress_text(p))
            )
        )
        req = _Request(request_id, tag, fn, args, kwargs, task, on_result, on_error)
        dropped: list[_Request] = []
        with self._cond:
            if self._stopping:
                raise RuntimeError("the engine worker has been shut down")
            if tag is not None:
                dropped = [r for r in self._queue if r.tag == tag]
                for r in dropped:
                    self._queue.remove(r)
                if self._running is not None and self._running.tag == tag:
                    self._running.task.cancel()
            self._callbacks[request_id] = req
            self._queue.append(req)
            self._cond.notify()
        for r in dropped:
            self.dropped.emit((r.request_id, r.tag))
        return request_id

    def cancel(self, tag: str) -> None:
        """Drop queued requests with ``tag`` and ask the running one with it to stop."""
        with self._cond:
            dropped = [r for r in self._queue if r.tag == tag]
            for r in dropped:
                self._queue.remove(r)
            if self._running is not None and self._running.tag == tag:
                self._running.task.cancel()
        for r in dropped:
            self.dropped.emit((r.request_id, r.tag))

    def is_busy(self) -> bool:
        with self._cond:
            return bool(self._queue) or self._running is not None

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop taking requests, cancel the running one and wait for the thread (``timeout`` s)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            if self._running is not None:
                self._running.task.cancel()
            self._cond.notify_all()
        self._callbacks.clear()
        self._thread.join(timeout)

    # -- worker thread -------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                req = self._queue.popleft()
                self._running = req
            self.started.emit((req.request_id, req.tag))
            signal, payload = self._execute(req)
            with self._cond:
                self._running = None
                now_idle = not self._queue
            # Drop this thread's references before the GUI thread can drop its own: until the signal
            # below is delivered, ``_callbacks`` keeps the request (its function, arguments and
            # callbacks, which may hold widgets), so the last reference always goes on the GUI thread
            # and no Qt object is ever destroyed here.
            req = None
            signal.emit(payload)
            payload = None
            if now_idle:
                self.idle.emit()

    def _execute(self, req: _Request) -> tuple[Any, Any]:
        """Run one request; returns the signal to emit and its payload."""
        try:
            kwargs = dict(req.kwargs)
            if _takes_task(req.fn):
                kwargs["task"] = req.task
            value = req.fn(*req.args, **kwargs)
        except Cancelled as exc:
            if req.task.cancelled:  # superseded or cancelled by us: nobody waits for it
                return self.dropped, (req.request_id, req.tag)
            # Stopped by its own limit (a compile timeout): the user hears why.
            return self.failed, WorkError(req.request_id, req.tag, _error_message(exc), "", _without_frames(exc))
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a message, never a crash
            details = traceback.format_exc()
            return self.failed, WorkError(req.request_id, req.tag, _error_message(exc), details, _without_frames(exc))
        if req.task.cancelled:  # superseded while running: its result is stale
            return self.dropped, (req.request_id, req.tag)
        return self.resultReady, WorkResult(req.request_id, req.tag, value)

    # -- GUI thread again ----------------------------------------------------------------------

    def _deliver_result(self, result: WorkResult) -> None:
        req = self._callbacks.pop(result.request_id, None)
        if req is not None and req.on_result is not None:
            req.on_result(result.value)

    def _forget(self, dropped: tuple[int, str | None]) -> None:
        self._callbacks.pop(dropped[0], None)

    def _deliver_error(self, error: WorkError) -> None:
        req = self._callbacks.pop(error.request_id, None)
        if req is not None and req.on_error is not None:
            req.on_error(error)


def _without_frames(exc: BaseException) -> BaseException:
    """``exc`` without its tracebacks (already formatted): their frames may hold the job's objects,
    and they must not be released on the worker thread when the GUI thread is done with the error."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return exc


def _takes_task(fn: Callable[..., Any]) -> bool:
    try:
        return "task" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
