"""A session in a child process: the debuggee can crash or hang without taking the client down.

``ChildSession`` has the same surface as an in-process session (``send(command)``, events delivered to a
callback) and runs a handler class (given as ``"module:Class"``, imported in the child) that follows the
``SessionHandler`` shape: ``__init__(emit)``, ``handle(command)``, ``pause()``. The child reads commands on
its main thread and the handler runs them on its own worker thread, so a pause request is always read.

Crash: the child's death is noticed through its process sentinel and reported as ``Crashed`` with the last
``Progress``/``Stopped`` location it sent. Hang: no event for ``hang_timeout`` seconds while a command runs,
or ``stop()`` not answered within a second, kills the child. ``restart()`` starts a new child; the client
(``engine.session.client``) opens the module and sets the breakpoints again, so the user can rerun to the
same point. This is the crash-isolated ``Transport`` of the client.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from engine.runtime.hal.device import NOT_IN_BATCH
from engine.session.protocol import (
    Answer,
    BatchNames,
    Call,
    Command,
    Continue,
    Crashed,
    Event,
    Failed,
    Finished,
    Location,
    Progress,
    RunTo,
    Shutdown,
    Step,
    Stopped,
    TensorRef,
    tensor_refs,
)

_PAUSE = "__pause__"
KILL_WAIT_S = 30.0  # how long ``kill`` waits for a SIGKILLed session to be gone


# ------------------------------------------------------------------------------------------------ child


def _tensor_refs(event: Event) -> list[TensorRef]:
    """The tensors an event carries (``Finished.outputs``, the tensors of an answer)."""
    if isinstance(event, Finished | Answer):
        return list(tensor_refs(event))
    return []


def _export_tensors(event: Event) -> Event:
    """Move inline arrays into shared memory before the event crosses the pipe."""
    for ref in _tensor_refs(event):
        if ref.array is not None:
            array = np.ascontiguousarray(ref.array)
            block = shared_memory.SharedMemory(create=True, size=max(array.nbytes, 1))
            np.ndarray(array.shape, array.dtype, buffer=block.buf)[...] = array
            ref.shm_name, ref.array = block.name, None
            block.close()  # the parent unlinks it after reading
    return event


def _progress_file() -> str:
    """A two-u64 file in shared memory (``/dev/shm`` where there is one) for a child's progress cell."""
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else None
    fd, path = tempfile.mkstemp(prefix="iree-lens-progress-", dir=folder)
    with os.fdopen(fd, "wb") as f:
        f.write(np.array([0, NOT_IN_BATCH], np.uint64).tobytes())
    return path


def _child_main(conn, handler_path: str, progress_path: str | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal belongs to the parent
    send_lock = threading.Lock()

    def emit(event: Event) -> None:
        with send_lock:
            conn.send(_export_tensors(event))

    module_name, _, class_name = handler_path.partition(":")
    handler = getattr(importlib.import_module(module_name), class_name)(emit)
    if progress_path is not None and hasattr(handler, "progress_cell"):
        # Which dispatch of a native batch runs, where the parent reads it if a kernel kills this process.
        handler.progress_cell = np.memmap(progress_path, np.uint64, "r+", shape=(2,))
    work: list[Command] = []
    ready = threading.Condition()

    def worker() -> None:
        while True:
            with ready:
                while not work:
                    ready.wait()
                command = work.pop(0)
            if isinstance(command, Shutdown):
                return
            try:
                handler.handle(command)
            except Exception as e:  # a bug in a handler is reported, not fatal to the session
                emit(Failed(f"{type(e).__name__}: {e}"))

    thread = threading.Thread(target=worker, name="session-worker", daemon=True)
    thread.start()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            message = Shutdown()
        if message == _PAUSE:
            handler.pause()
            continue
        with ready:
            work.append(message)
            ready.notify()
        if isinstance(message, Shutdown):
            thread.join(timeout=2)
            return


# ----------------------------------------------------------------------------------------------- parent

_RUNNING = (Call, Step, Continue, RunTo)


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "the session process stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        meaning = {
            "SIGSEGV": "segmentation fault",
            "SIGABRT": "abort",
            "SIGBUS": "bus error",
            "SIGILL": "illegal instruction",
            "SIGFPE": "arithmetic fault",
            "SIGKILL": "killed",
        }
        return f"the session process died: {meaning.get(name, name)} ({name})"
    return f"the session process exited with code {exitcode}"


class ChildSession:
    crash_isolated = True

    def __init__(
        self,
        handler_path: str,
        on_event: Callable[[Event], Any],
        *,
        hang_timeout: float | None = None,
        progress: bool = False,
    ):
        self.handler_path = handler_path
        self.on_event = on_event
        self.progress = progress  # deliver Progress events (one per dispatch) too
        self.hang_timeout = hang_timeout
        self._ctx = mp.get_context("spawn")
        self._last_location = Location()
        # The last Progress before a native batch (its dispatch names), and the file the child's device keeps
        # the running one's index in (two u64: ``Device.progress_cell``).
        self._last_batch: Progress | None = None
        self._batch_names = BatchNames()  # the names of the batches the child sent (once per batch)
        self._progress_path = _progress_file()
        self._running_since: float | None = None
        self._last_event_at = time.monotonic()
        self._lock = threading.Lock()
        self._process = None
        self._conn = None
        self._expected_exit = False
        self.start()

    # -- life cycle

    def start(self) -> None:
        parent_conn, child_conn = self._ctx.Pipe()
        self._process = self._ctx.Process(
            target=_child_main,
            args=(child_conn, self.handler_path, self._progress_path),
            name="iree-lens-session",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        self._conn = parent_conn
        self._expected_exit = False
        self._reader = threading.Thread(
            target=self._read_events, args=(parent_conn, self._process), daemon=True
        )
        self._reader.start()
        if self.hang_timeout:
            threading.Thread(target=self._watchdog, args=(self._process,), daemon=True).start()

    @property
    def alive(self) -> bool:
        return bool(self._process and self._process.is_alive())

    @property
    def pid(self) -> int | None:
        """The child's process id (None before it started)."""
        return self._process.pid if self._process is not None else None

    def restart(self) -> None:
        """A new child (nothing open: the client sends its set-up again)."""
        self.kill(report=False)
        self.start()

    def close(self) -> None:
        if self.alive:
            self._expected_exit = True
            try:
                self._conn.send(Shutdown())
            except OSError:
                pass
            self._process.join(timeout=3)
        self.kill(report=False)
        try:
            os.unlink(self._progress_path)
        except OSError:
            pass

    def _crash_location(self) -> Location:
        """Where the child was when it died: the last location it sent; inside a native batch, the dispatch
        its device's progress cell names."""
        location, batch = self._last_location, self._last_batch
        if batch is None:
            return location
        try:
            within, first = np.fromfile(self._progress_path, np.uint64, 2)
        except (OSError, ValueError):
            return location
        index = int(within) + int(first)
        if int(first) >= NOT_IN_BATCH or not 0 <= index < len(batch.batch):
            return location  # between batches: the location says no dispatch
        return replace(location, dispatch=batch.batch[index], dispatch_index=batch.batch_first + index)

    def kill(self, *, report: bool = True, reason: str | None = None) -> None:
        process = self._process
        if process is None:
            return
        if process.is_alive():
            self._expected_exit = True  # the reader thread must not report this death a second time
            process.kill()
            # SIGKILL cannot be refused, but a large process takes a while to be torn down on a loaded
            # machine: wait for it (2 s was too short at a load of 8), so ``alive`` is False once reported.
            process.join(timeout=KILL_WAIT_S)
            # The reader thread joins the dying process too: when it reaps it first, this join's waitpid
            # fails (ECHILD) and returns before the reader has recorded the exit code, so ``is_alive`` would
            # still say True for a moment after the Crashed below.
            deadline = time.monotonic() + KILL_WAIT_S
            while process.is_alive() and time.monotonic() < deadline:
                time.sleep(0.005)
        if report:
            self._emit(
                Crashed(reason or describe_exit(process.exitcode), self._crash_location(), process.exitcode)
            )

    # -- commands

    def send(self, command: Command) -> None:
        if isinstance(command, _RUNNING):
            self._running_since = time.monotonic()
            self._last_event_at = time.monotonic()
        self._send(command)

    def pause(self) -> None:
        self._send(_PAUSE)

    def _send(self, message: object) -> None:
        try:
            self._conn.send(message)
        except (BrokenPipeError, ConnectionResetError):
            # The session process is gone (a kernel crashed it between its last event and this command): the
            # reader reports the crash when it reads the end of the pipe; the command is lost with the process.
            pass

    def stop(self, timeout: float = 1.0) -> bool:
        """Pause the run; if the session does not stop within ``timeout`` s, kill it. True if it paused."""
        if not self.alive:
            return False
        stopped = threading.Event()
        self._stop_waiter = stopped
        self.pause()
        if stopped.wait(timeout):
            return True
        self.kill(reason=f"the run did not stop within {timeout:g} s and was killed")
        return False

    # -- events

    def _emit(self, event: Event) -> None:
        with self._lock:
            self.on_event(event)

    def _read_events(self, conn, process) -> None:
        while True:
            try:
                event = conn.recv()
            except (EOFError, OSError):
                break
            self._last_event_at = time.monotonic()
            if isinstance(event, Progress):
                event = self._batch_names.complete(event)
            if isinstance(event, (Progress, Stopped)):
                self._last_location = event.location
                self._last_batch = event if isinstance(event, Progress) and event.batch else None
            if isinstance(event, (Stopped, Finished, Failed, Answer)):
                self._running_since = None
            if isinstance(event, Stopped):
                waiter = getattr(self, "_stop_waiter", None)
                if waiter is not None:
                    waiter.set()
            for ref in _tensor_refs(event):
                if ref.shm_name:
                    ref.to_numpy()  # copy out of shared memory and free the block
            if isinstance(event, Progress) and not self.progress:
                continue
            self._emit(event)
        process.join(timeout=5)
        # Another thread asking ``alive`` may have reaped the process a moment before this join's waitpid
        # (ECHILD: join returns with no exit code yet); the code lands when that thread records it.
        deadline = time.monotonic() + 1.0
        while process.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.005)
        if not self._expected_exit and process is self._process:
            self._running_since = None
            self._emit(Crashed(describe_exit(process.exitcode), self._crash_location(), process.exitcode))

    def _watchdog(self, process) -> None:
        while process.is_alive() and process is self._process:
            time.sleep(0.1)
            since = self._running_since
            if since is not None and time.monotonic() - self._last_event_at > self.hang_timeout:
                self._running_since = None
                self.kill(
                    reason=f"no answer from the session for {self.hang_timeout:g} s (a hang); it was killed"
                )
                return
