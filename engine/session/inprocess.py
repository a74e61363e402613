"""A session in this process, behind the same surface as ``ChildSession`` (for tests and scripts).

Commands run one at a time on a worker thread, so the caller never blocks on a long run and a pause
request is delivered while a command runs. This is the client's ``Transport`` without crash isolation: a
fault in a kernel takes the whole process down.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from engine.session.protocol import Command, Event, Failed, Progress, Shutdown


class _Call:
    """Work for the worker thread that is not a protocol command (closing the handler)."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn


class InProcessSession:
    crash_isolated = False

    def __init__(
        self,
        handler_factory: Callable[[Callable[[Event], Any]], Any],
        on_event: Callable[[Event], Any],
        *,
        progress: bool = False,
    ):
        self.on_event = on_event
        self.progress = progress  # deliver Progress events (one per dispatch) too
        self.handler_factory = handler_factory
        self.handler = handler_factory(self._emit)
        if hasattr(self.handler, "report_progress"):
            self.handler.report_progress = progress  # Progress dropped here: not built per dispatch
        self._commands: queue.Queue[Command] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="session-worker", daemon=True)
        self._thread.start()

    def _emit(self, event: Event) -> None:
        if self.progress or not isinstance(event, Progress):
            self.on_event(event)

    def _work(self) -> None:
        while True:
            command = self._commands.get()
            if isinstance(command, Shutdown):
                return
            try:
                if isinstance(command, _Call):
                    command.fn()
                    continue
                self.handler.handle(command)
            except Exception as e:  # a bug in a handler is reported, not fatal to the worker
                self._emit(Failed(f"{type(e).__name__}: {e}"))

    def send(self, command: Command) -> None:
        self._commands.put(command)

    def pause(self) -> None:
        self.handler.pause()

    def stop(self, timeout: float = 1.0) -> bool:
        self.pause()
        return True

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def restart(self) -> None:
        """A fresh handler (nothing open), after the commands already queued."""

        def fresh() -> None:
            self._close_handler()
            self.handler = self.handler_factory(self._emit)
            if hasattr(self.handler, "report_progress"):
                self.handler.report_progress = self.progress

        self._commands.put(_Call(fresh))

    def _close_handler(self) -> None:
        close = getattr(self.handler, "close", None)
        if callable(close):  # a run parked at a dispatch waits for a command: abandon it
            close()

    def close(self) -> None:
        self._commands.put(_Call(self._close_handler))
        self._commands.put(Shutdown())
        self._thread.join(timeout=5)
