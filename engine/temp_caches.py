"""The folders IREE Lens keeps under the temporary directory, and their pruning.

Builds keyed by content (a program compiled for the window, a rebuild of a module's sources, a kernel's
recording build, a flow-phase dump) are kept in ``$TMPDIR/<cache>/KEY`` so that a second process, or the same
program opened again, reuses them. Nothing else removes them, and one big program compiled with every phase
kept is hundreds of megabytes: each cache is pruned of what no process has used for ``STALE_AFTER_S``, once
per process, at its first use. A hit marks its entry used (``mark_used``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

STALE_AFTER_S = 7 * 24 * 3600  # a week unused

_pruned: set[Path] = set()


def cache_root(name: str) -> Path:
    """``$TMPDIR/name``, pruned of stale entries the first time this process asks for it."""
    root = Path(tempfile.gettempdir()) / name
    if root not in _pruned:
        _pruned.add(root)
        prune_stale(root)
    return root


def prune_stale(root: Path, max_age_s: float = STALE_AFTER_S, now: float | None = None) -> list[Path]:
    """Remove the entries of ``root`` (folders, files, their ``.lock`` files) last used more than ``max_age_s``
    ago; returns them. Entries another process removes meanwhile, or that cannot be removed, are left."""
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime <= max_age_s:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def mark_used(entry: Path) -> None:
    """Mark a reused entry as used now, so that pruning keeps it."""
    try:
        os.utime(entry)
    except OSError:
        pass  # gone meanwhile: the caller reads what it already has


def scratch_dir(prefix: str) -> Path:
    """A new folder of its own for one job's files (a compile's phases, a bundle, generated inputs), in
    ``$TMPDIR/iree-lens-scratch``: pruned, as the caches are, once a week unused, where ``tempfile.mkdtemp`` in
    the temporary folder itself would stay there for good."""
    root = cache_root("iree-lens-scratch")
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))
