"""A session in this process, behind the same surface as ``ChildSession`` (for tests and scripts).

Commands run one at a time on a worker thread, so the caller never blocks on a long run and a pause
request is delivered while a command runs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from engine.session.protocol import Command, Event, Failed, Progress, Shutdown


class InProcessSession:
    def __init__(
        self, handler_factory: Callable[[Callable[[Event], Any]], Any], on_event: Callable[[Event], Any]
    ):
        self.on_event = on_event
        self.handler = handler_factory(self._emit)
        self._commands: queue.Queue[Command] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="session-worker", daemon=True)
        self._thread.start()

    def _emit(self, event: Event) -> None:
        if not isinstance(event, Progress):  # progress only matters when the process can die
            self.on_event(event)

    def _work(self) -> None:
        while True:
            command = self._commands.get()
            if isinstance(command, Shutdown):
                return
            try:
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

    def close(self) -> None:
        self._commands.put(Shutdown())
        self._thread.join(timeout=5)
