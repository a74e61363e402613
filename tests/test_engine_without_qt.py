"""The engine needs no Qt: every module under ``engine/`` imports with PySide6 and pyqtgraph blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKER = Path(__file__).resolve().parent / "no_qt"

_IMPORT_ALL = """
import importlib, pkgutil, sys
import engine
failed = []
names = ["engine"] + [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as e:  # report every module, not only the first
        failed.append(f"{name}: {type(e).__name__}: {e}")
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6", "app"))
print(len(names), "modules")
print("\\n".join(failed))
sys.exit(1 if failed or leaked else 0)
"""


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BLOCKER), str(ROOT)]))
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_blocker_blocks_qt():
    proc = _run("import PySide6")
    assert proc.returncode != 0 and "PySide6 is blocked" in proc.stderr


def test_every_engine_module_imports_without_qt():
    proc = _run(_IMPORT_ALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count = int(proc.stdout.split()[0])
    assert count > 60  # the walk really found the engine's modules
