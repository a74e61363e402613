"""One process at a time in a cache folder shared through the temporary directory.

Caches keyed by content (``/tmp/iree-lens-kernel/KEY``...) are shared by every process of the user: two
windows, a test run's parallel workers. Two processes filling the same folder at once overwrite each other's
files half way (a reader sees a truncated dump). ``folder_lock(out)`` holds ``out`` alone (an ``flock`` on
``out.lock`` beside it): the second process waits, then finds the first one's result.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Hold the cache folder ``out`` alone while the block runs. Without ``fcntl`` (Windows) nothing is locked."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent / f"{out.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
