"""The test session never touches the user's settings, saved session or recent files.

tests/conftest.py points every per-user location into a temporary folder for the whole session. This
proves it: a real application in a subprocess (same environment as every test) opens a module, which
writes recent files, the layout and the saved session; all of it lands in the isolated folder and
nothing under the user's real config and state folders changes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from app.session_bridge import state_dir
from app.settings import LensSettings, open_settings

REPO = Path(__file__).resolve().parents[2]

_APP = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from app.main import start_app

    app, window = start_app([sys.argv[1]])

    def check():
        if window.context.module is None:
            QTimer.singleShot(50, check)
            return
        window.close()
        app.quit()

    QTimer.singleShot(50, check)
    QTimer.singleShot(30000, app.quit)
    app.exec()
    print("recent:", window.settings.recent_files()[0])
    print("settings:", window.settings.store.fileName())
    """
)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``root`` with its size and modification time (empty when ``root`` is absent)."""
    if not root.exists():
        return {}
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _real_locations() -> list[Path]:
    config = Path(os.environ["LENS_TEST_REAL_CONFIG_HOME"])
    state = Path(os.environ["LENS_TEST_REAL_STATE_HOME"])
    return [config / "IREE Lens", state / "iree-lens"]


def test_in_process_locations_are_isolated():
    # Each app test's own state folder (tests/app/conftest.py), the settings file in it.
    assert state_dir() == Path(os.environ["IREE_LENS_STATE_DIR"])
    settings_file = Path(LensSettings().store.fileName())
    for real in _real_locations():
        assert not settings_file.is_relative_to(real) and not state_dir().is_relative_to(real)


def test_settings_follow_the_state_folder(tmp_path, monkeypatch):
    """A walk or a test that points IREE_LENS_STATE_DIR away from the user's state gets its settings there too,
    whatever XDG_CONFIG_HOME says: recent files, layout and device choice never reach the user's file."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))
    settings = LensSettings()
    settings.add_recent_file(tmp_path / "model.vmfb")
    settings_file = Path(settings.store.fileName())
    assert settings_file == tmp_path / "state" / "settings.ini" and settings_file.exists()
    assert not (tmp_path / "xdg").exists()
    assert LensSettings(open_settings()).recent_files() == [(tmp_path / "model.vmfb").resolve()]
    # Without a state folder, the user's config location (XDG_CONFIG_HOME) as before.
    monkeypatch.delenv("IREE_LENS_STATE_DIR")
    assert not Path(open_settings().fileName()).is_relative_to(tmp_path / "state")


def test_a_real_application_writes_only_into_the_isolated_folder(compiled):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    before = {str(p): _tree(p) for p in _real_locations()}
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-c", _APP, str(vmfb)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert Path(lines["recent"]) == vmfb.resolve()
    settings_file = Path(lines["settings"])
    # This test's own state folder (tests/app/conftest.py): the settings live beside the saved session.
    assert settings_file.is_relative_to(os.environ["IREE_LENS_STATE_DIR"]) and settings_file.exists()
    assert not any(settings_file.is_relative_to(real) for real in _real_locations())
    assert any(settings_file.parent.rglob("session.json"))  # the saved session was written, and written here
    assert str(vmfb.resolve()) in settings_file.read_text()
    assert {str(p): _tree(p) for p in _real_locations()} == before
