"""The package is what it says: a build of the project (not the checkout) carries the bundled samples of
the top-level ``resources/`` folder as package data, and ``engine.samples`` finds them there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_built_package_has_its_samples(tmp_path):
    src = tmp_path / "src"
    for part in ("app", "engine", "resources"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    build = tmp_path / "lib"
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build", "--build-lib", str(build)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    shipped = sorted(p.name for p in (build / "engine" / "resources" / "samples").glob("*.mlir"))
    in_checkout = sorted(p.name for p in (REPO / "resources" / "samples").glob("*.mlir"))
    assert shipped == in_checkout and "mlp.mlir" in shipped
    # The installed engine (run from elsewhere, so the checkout is not on the path) lists them.
    code = "import engine.samples as s; print(s.SAMPLES_DIR); print(','.join(s.sample_names()))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(build)!r}); {code}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    folder, names = out.stdout.splitlines()
    assert Path(folder).is_relative_to(build)
    assert names.split(",") == [n.removesuffix(".mlir") for n in shipped]
