"""Fixtures of the Qt application tests: isolated settings and a main window checked for leaks."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from app.qt_none_refcount import pin_none

# The window pins None when its application starts; views tested on their own need the same.
pin_none()


@pytest.fixture(scope="module", autouse=True)
def gui_thread_gc(qapp):
    """As in the application: the cyclic collector runs on the GUI thread only (app/gui_gc.py), while a
    module of the window's tests runs; the engine's tests after it get Python's automatic collection back
    (they run no event loop, so the timer would never collect their cycles)."""
    from app.gui_gc import collect_on_gui_thread, stop_collecting_on_gui_thread

    collect_on_gui_thread()
    yield
    qapp.processEvents()
    stop_collecting_on_gui_thread()


@pytest.fixture(autouse=True)
def collect_garbage_on_gui_thread(qapp):
    """What a test left unreachable (closed windows, panels) is destroyed here, on the GUI thread."""
    yield
    qapp.processEvents()
    gc.collect()


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path_factory, monkeypatch):
    """Every app test gets its own settings folder; the user's own settings are never read or written.
    The settings file lives in the saved session's folder when ``IREE_LENS_STATE_DIR`` is set (app/settings.py),
    so each test gets its own state folder too (a test may point it elsewhere, settings following)."""
    root = tmp_path_factory.mktemp("settings")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg"))
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(root / "state"))
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(root))
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(root))
    return root


@pytest.fixture
def make_main_window(qtbot, qapp):
    """Factory of main windows (like napari's ``make_napari_viewer``); checks no widget leaks after."""
    from app.main import configure_pyqtgraph
    from app.main_window import MainWindow

    configure_pyqtgraph()
    before = {id(w) for w in QApplication.topLevelWidgets()}
    windows: list[MainWindow] = []

    def make(**kwargs) -> MainWindow:
        window = MainWindow(**kwargs)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield make
    for w in windows:
        w.close()
        w.deleteLater()
    qapp.processEvents()
    leaked = [
        w
        for w in QApplication.topLevelWidgets()
        if w.isVisible() and id(w) not in before and not any(w is x for x in windows)
    ]
    assert not leaked, f"widgets left open: {leaked}"


@pytest.fixture
def main_window(make_main_window):
    return make_main_window()
