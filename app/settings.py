"""Persistent user settings: recent files and the window layout, through ``QSettings``.

Settings live in an INI file under the user's config location (organisation "IREE Lens"), or, when
``$IREE_LENS_STATE_DIR`` is set (tests, scripted walks of the window), in ``settings.ini`` inside that folder,
beside the saved session: whatever points the saved session away from the user's own points the settings
away too, so a walk or a test never reads or writes the user's recent files, layout or device choice.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

ORGANIZATION = "IREE Lens"
APPLICATION = "IREE Lens"
MAX_RECENT_FILES = 10
STATE_DIR_ENV = "IREE_LENS_STATE_DIR"  # the saved session's folder; the settings file too when set
SETTINGS_FILE = "settings.ini"

_RECENT_KEY = "files/recent"
_GEOMETRY_KEY = "window/geometry"
_STATE_KEY = "window/state"
# Bump when the set or the names of docks change, so an old saved state is not applied to new docks.
LAYOUT_VERSION = 2


def open_settings() -> QSettings:
    """The application's settings store: ``$IREE_LENS_STATE_DIR/settings.ini`` when that is set, else the
    user's INI file (its location follows ``XDG_CONFIG_HOME`` and ``QSettings.setPath``)."""
    state = os.environ.get(STATE_DIR_ENV)
    if state:
        return QSettings(str(Path(state) / SETTINGS_FILE), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)


class LensSettings:
    """Typed access to the few things IREE Lens remembers between runs."""

    def __init__(self, store: QSettings | None = None):
        self.store = store if store is not None else open_settings()

    # -- recent files --------------------------------------------------------------------------

    def recent_files(self) -> list[Path]:
        value = self.store.value(_RECENT_KEY, [])
        if isinstance(value, str):  # QSettings returns a single-item list as a plain string
            value = [value]
        return [Path(v) for v in (value or []) if v]

    def add_recent_file(self, path: Path) -> list[Path]:
        path = Path(path).resolve()
        files = [path] + [p for p in self.recent_files() if p != path]
        files = files[:MAX_RECENT_FILES]
        self.store.setValue(_RECENT_KEY, [str(p) for p in files])
        self.store.sync()
        return files

    def clear_recent_files(self) -> None:
        self.store.remove(_RECENT_KEY)
        self.store.sync()

    # -- window layout -------------------------------------------------------------------------

    def window_layout(self) -> tuple[QByteArray | None, QByteArray | None]:
        """``(geometry, state)`` saved by :meth:`save_window_layout`, or ``None`` for each missing one."""
        if self.store.value("window/layout_version", 0, type=int) != LAYOUT_VERSION:
            return None, None
        geometry = self.store.value(_GEOMETRY_KEY)
        state = self.store.value(_STATE_KEY)
        return (
            geometry if isinstance(geometry, QByteArray) else None,
            state if isinstance(state, QByteArray) else None,
        )

    def save_window_layout(self, geometry: QByteArray, state: QByteArray) -> None:
        self.store.setValue("window/layout_version", LAYOUT_VERSION)
        self.store.setValue(_GEOMETRY_KEY, geometry)
        self.store.setValue(_STATE_KEY, state)
        self.store.sync()
