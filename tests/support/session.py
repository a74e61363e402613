"""Helpers of the session tests: an event collector, a time-travel session driven in this thread, and the
session test programs compiled on demand."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.compiler.targets import TARGETS
from engine.session.protocol import Call, Failed, Open, ReadBindings
from engine.session.timetravel_session import TimeTravelSession
from support import iree_compile

PROGRAMS = Path(__file__).parents[1] / "session_programs"


class Events:
    """Collects a session's events; ``next()`` waits for the next one."""

    def __init__(self):
        self.items: list = []
        self._cv = threading.Condition()
        self._read = 0

    def __call__(self, event):
        with self._cv:
            self.items.append(event)
            self._cv.notify_all()

    def next(self, timeout: float = 60.0):
        with self._cv:
            if not self._cv.wait_for(lambda: len(self.items) > self._read, timeout):
                raise AssertionError(f"no event within {timeout} s; so far: {self.items}")
            self._read += 1
            return self.items[self._read - 1]


class TimeTravelClient:
    """A ``TimeTravelSession`` on ``device`` with ``function`` called on ``inputs`` and stopped at its entry;
    ``send`` hands it a command and returns its last event (no command may fail). ``memo_seconds`` sets the
    dispatch memo's minimum kernel time (None: the session's default)."""

    def __init__(self, module, function, inputs, device: str = "local-sync", memo_seconds: float | None = None):
        self.events: list = []
        self.session = TimeTravelSession(self.events.append)
        self.send(Open(str(module), device))
        if memo_seconds is not None:
            self.session.travel.memo.min_seconds = memo_seconds
        self.send(Call(function, tuple(inputs), True))

    def send(self, command):
        self.events.clear()
        self.session.handle(command)
        assert not any(isinstance(e, Failed) for e in self.events), self.events
        return self.events[-1]

    def bindings(self) -> list:
        """The bindings of the dispatch the session is stopped at, as numpy arrays."""
        return [b.to_numpy() for b in self.send(ReadBindings()).tensors]


def compile_program(name: str, target: str, out_dir: Path, *flags: str) -> Path:
    """``session_programs/NAME.mlir`` (or the absolute path NAME) compiled for ``target`` (a ``TARGETS`` key) with the real iree-compile."""
    source = Path(name) if Path(name).is_absolute() else PROGRAMS / f"{name}.mlir"
    suffix = ".traced" if flags else ""
    out = out_dir / f"{source.stem}.{target}{suffix}.vmfb"
    if not out.exists():
        proc = iree_compile([str(source), *TARGETS[target].flags, *flags, "-o", str(out)])
        if proc.returncode != 0:
            raise RuntimeError(f"iree-compile failed for {source}:\n{proc.stderr[-3000:]}")
    return out
