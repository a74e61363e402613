"""``iree-lens`` from a shell: without a display it says so (never Qt's abort), an unknown word is an
unknown command with the list of commands, a file argument still goes to the window, and importing the
application does not touch the interpreter (the None pin runs when the window starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import COMMAND_MODULES

LENS = [sys.executable, "-m", "app.launcher"]
REPO = Path(__file__).resolve().parents[2]


def headless_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(extra)
    return env


def lens(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*LENS, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args, env",
    [
        ((), headless_env()),
        (("some/file.vmfb",), headless_env()),
        (("model.mlir",), headless_env()),
        ((), headless_env(DISPLAY=":97")),  # set, but no X server answers there
        ((), headless_env(QT_QPA_PLATFORM="xcb")),
        ((), headless_env(QT_QPA_PLATFORM="wayland")),
    ],
    ids=["bare", "vmfb-file", "mlir-file", "dead-display", "xcb-no-display", "wayland-no-display"],
)
def test_no_display_is_a_clear_message_not_an_abort(args, env):
    proc = lens(*args, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "needs a display" in proc.stderr
    assert "phases" in proc.stderr and "inspect" in proc.stderr  # the sub-commands that work without one
    assert "Aborted" not in proc.stderr and "qt.qpa" not in proc.stderr


def test_unknown_command_lists_the_commands():
    proc = lens("frobnicate", env=headless_env())
    assert proc.returncode == 2
    assert "unknown command 'frobnicate'" in proc.stderr
    for command in COMMAND_MODULES:
        assert f"  {command}" in proc.stderr
    # The same with a display available: an unknown word never opens a window.
    proc = lens("frobnicate", "--x", env=headless_env(QT_QPA_PLATFORM="offscreen"))
    assert proc.returncode == 2 and "unknown command" in proc.stderr


def test_sub_commands_run_without_a_display():
    proc = lens("phases", "--help", env=headless_env())
    assert proc.returncode == 0 and "--iree-hal-target-device" in proc.stdout


def test_console_script_reports_missing_display():
    script = Path(sys.executable).parent / "iree-lens"
    if not script.exists():
        pytest.skip("iree-lens is not installed as a console script in this environment")
    proc = subprocess.run([str(script)], env=headless_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "needs a display" in proc.stderr


def test_importing_the_app_leaves_none_alone():
    code = (
        "import sys; import app, app.launcher, app.views.ir_viewer, app.views.phase_timeline; "
        "print(sys.getrefcount(None) < 1 << 40)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "True", proc.stderr
    code = "import sys; from app.main import make_application; make_application(); print(sys.getrefcount(None) >= 1 << 40)"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
        env=headless_env(QT_QPA_PLATFORM="offscreen"),
    )
    assert proc.stdout.strip() == "True", proc.stderr
