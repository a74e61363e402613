"""Helpers shared by test modules (import as ``from support import ...``; conftest modules are not importable
by name reliably, since ``tests/`` and ``tests/app/`` each have one)."""

from __future__ import annotations

import sys
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def iree_tool(name: str) -> str:
    """Path of one of IREE's command-line tools installed beside this interpreter."""
    p = VENV_BIN / name
    return str(p) if p.exists() else name


def lens_run(
    vmfb, function: str, inputs=(), engine: str = "debug", *extra: str, timeout: float | None = None
):
    """``iree-lens run`` as a user runs it (a separate process), returning the completed process."""
    import subprocess

    cmd = [
        sys.executable,
        "-m",
        "app.launcher",
        "run",
        str(vmfb),
        f"--function={function}",
        f"--engine={engine}",
    ]
    cmd += [f"--input={i}" for i in inputs] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
