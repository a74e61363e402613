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
