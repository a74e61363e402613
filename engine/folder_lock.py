"""One process at a time in a cache folder shared through the temporary directory.

Caches keyed by content (``/tmp/iree-lens-kernel/KEY``...) are shared by every process of the user: two
windows, a test run's parallel workers. Two processes filling the same folder at once overwrite each other's
files half way (a reader sees a truncated dump). ``folder_lock(out)`` holds ``out`` alone (an ``flock`` on
``out.lock`` beside it): the second process waits, then finds the first one's result.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 0.25  # how often a cancellable wait looks at ``cancelled``


@contextlib.contextmanager
def folder_lock(out: Path, cancelled: Callable[[], bool] | None = None) -> Iterator[bool]:
    """Hold the cache folder ``out`` alone while the block runs; yields True. With ``cancelled``, the wait
    gives up once it answers True and yields False without the lock (the block must then not write ``out``).
    Without ``fcntl`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:
        yield True
        return
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent / f"{out.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if cancelled is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _mark_used(fd, out)
            yield True
            return
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if cancelled():
                    yield False
                    return
                time.sleep(POLL_S)
        _mark_used(fd, out)
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _mark_used(fd: int, out: Path) -> None:
    """The folder and its lock file are in use now: ``engine.temp_caches`` prunes what is unused for long."""
    try:
        os.utime(fd)
        if out.exists():
            os.utime(out)
    except OSError:
        pass
