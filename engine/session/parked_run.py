"""A run thread that can park inside a callback while the command loop keeps serving.

Both engines' sessions work this way: the program runs on a *run thread*; when it reaches a place where
the user wants to look (a dispatch, a trace point), the callback that the engine calls on that thread
*parks* it, the command loop (the session's ``handle``) returns and serves commands (queries,
breakpoints), and one command *resumes* the run. ``ParkedRun`` is that hand-over, once:

* ``start(target)`` (command loop): run ``target`` on the run thread (one for the object's life, ended
  by ``close()``); return once it parks or ends;
* ``park()`` (run thread, inside the callback): wait for the command that resumes the run and return it;
  raise ``Abandoned`` when the client gave the run up (a new call, a new module, shutdown);
* ``resume(command)`` (command loop): hand ``command`` to the parked run; return once it parks again or
  ends;
* ``abandon()`` (command loop): unwind a parked run and wait for its thread to end.

``state`` is a ``RunState``: idle (no run thread), running, parked. Events are the session's business:
a session emits its ``Stopped`` before calling ``park()`` and its ``Finished``/``Failed`` before
``target`` returns, so they are out by the time ``start``/``resume`` return and commands stay ordered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import StrEnum
from typing import Any


class RunState(StrEnum):
    IDLE = "idle"  # no run thread (no call, or a call stopped at a VM instruction)
    RUNNING = "running"  # the run thread executes
    PARKED = "parked"  # the run thread waits inside a callback for the command that resumes it


class Abandoned(BaseException):
    """Unwinds a parked run the client gave up. A BaseException so that no ``except Exception`` on the way
    (HAL, VM imports, IREE's runtime calling back into Python) turns it into a program error."""


_ABANDON = object()


class ParkedRun:
    def __init__(self, name: str = "session-run"):
        self.name = name
        self._cv = threading.Condition()
        self._state = RunState.IDLE
        self._resume: Any = None  # handed from the command loop to the parked run thread
        self._thread: threading.Thread | None = None
        self._target: Callable[[], Any] | None = None  # handed from ``start`` to the run thread
        self._closing = False

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def parked(self) -> bool:
        return self._state == RunState.PARKED

    def start(self, target: Callable[[], Any]) -> None:
        """Run ``target`` on the run thread; return once it parks or ends (``Abandoned`` ends it quietly).

        The run thread lives as long as this object (``close`` ends it): starting a thread for every call
        costs more than a small program's whole run."""
        with self._cv:
            self._state = RunState.RUNNING
            self._target = target
            if self._thread is None or not self._thread.is_alive():
                self._closing = False
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            else:
                self._cv.notify_all()
        self._wait_settled()

    def park(self) -> Any:
        """On the run thread: wait for the command that resumes the run and return it."""
        with self._cv:
            self._state = RunState.PARKED
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._resume is not None)
            command, self._resume = self._resume, None
        if command is _ABANDON:
            raise Abandoned()
        return command

    def resume(self, command: Any) -> None:
        """Hand ``command`` to the parked run; return once it parks again or ends."""
        with self._cv:
            if self._state != RunState.PARKED:
                raise RuntimeError("no run is parked")
            self._resume = command
            self._state = RunState.RUNNING
            self._cv.notify_all()
        self._wait_settled()

    def abandon(self, timeout: float = 5.0) -> None:
        """Unwind a parked run and wait until the run thread is idle again."""
        if self._state == RunState.PARKED:
            self.resume(_ABANDON)
        with self._cv:
            self._cv.wait_for(lambda: self._state == RunState.IDLE, timeout=timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Abandon a parked run and end the run thread."""
        self.abandon(timeout)
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _wait_settled(self) -> None:
        with self._cv:
            self._cv.wait_for(lambda: self._state != RunState.RUNNING)

    def _serve(self) -> None:
        """The run thread: run each target ``start`` hands over, until ``close``."""
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._target is not None or self._closing)
                if self._target is None:
                    return
                target, self._target = self._target, None
            self._main(target)

    def _main(self, target: Callable[[], Any]) -> None:
        try:
            target()
        except Abandoned:
            pass
        finally:
            with self._cv:
                self._state = RunState.IDLE
                self._cv.notify_all()
