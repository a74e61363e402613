"""The engine needs no Qt: every module under ``engine/`` imports with PySide6 and pyqtgraph blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

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



def _lens_without_qt(*argv: str) -> subprocess.CompletedProcess:
    cli = "import sys; from app.launcher import main; sys.exit(main())"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BLOCKER), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", cli, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_command_line_runs_without_qt(compiled, tmp_path):
    # The whole suite runs in one pytest collection with Qt importable (the application's tests need it),
    # so this is where the engine's behaviour, not only its imports, is proved Qt-free: the command line's
    # main paths (inspect, a debug run, a capture of every dispatch's tensors) run with PySide6 and
    # pyqtgraph blocked.
    vmfb = compiled.path("matmul", "llvm-cpu")
    inputs = ["--input=4x8xf32=0.5", "--input=8x16xf32=0.25"]
    inspect = _lens_without_qt("inspect", str(vmfb))
    assert inspect.returncode == 0 and "main" in inspect.stdout, inspect.stderr[-2000:]
    run = _lens_without_qt("run", str(vmfb), "--function=main", "--engine=debug", *inputs)
    assert run.returncode == 0, run.stderr[-2000:]
    # The sample is tanh(x @ w): 0.5 * 0.25 summed over 8 is 1 in every element, and tanh(1) printed as
    # iree-run-module prints it (%g).
    row = "[" + " ".join(["%g" % np.tanh(np.float32(1))] * 16) + "]"
    assert "4x16xf32=" + row * 4 in run.stdout, run.stdout
    bundle = tmp_path / "bundle"
    capture = _lens_without_qt("capture", str(vmfb), "--function=main", *inputs, f"--out={bundle}")
    assert capture.returncode == 0, capture.stderr[-2000:]
    assert any(bundle.iterdir())
