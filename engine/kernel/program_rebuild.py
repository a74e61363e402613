"""The kernel steppers' rebuilds of a module's program (the file its debug locations name): a cache folder
per module and program, and an ``iree-compile`` run that says only whether it produced its output.

A rebuild is best effort: a program that is gone, does not compile or takes too long gives ``None`` to the
caller, which then steps without the rebuild's sources or locations.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def program_and_cache_folder(module_path: str | Path, prefix: str = "") -> tuple[Path, Path] | None:
    """The program ``module_path`` was compiled from and the folder its rebuilds are kept in (named after
    both files' bytes, under the temporary folder); None when the module names no program that exists."""
    from engine.dispatch.rebuild_sources import program_named_by

    program = program_named_by(module_path)
    if program is None:
        return None
    key = hashlib.sha256(Path(module_path).read_bytes() + program.read_bytes()).hexdigest()[:20]
    from engine.temp_caches import cache_root

    return program, cache_root("iree-lens-kernel") / f"{prefix}{key}"


def compiles(cmd: list[str], timeout_s: float) -> bool:
    """Whether ``iree-compile`` (``cmd``) ran to success within ``timeout_s`` (its output is discarded)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
