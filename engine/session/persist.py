"""The user's work saved as it changes, so that a crash or a killed application loses nothing.

One session directory holds ``session.json`` (breakpoints, compile options, the open module and source,
run inputs) and ``sources/`` (edited sources and executables, one file each). Writes are atomic
(write a temporary file, then rename), so a kill in the middle of a save leaves the previous state.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "iree-lens" / "last-session"


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class SavedSession:
    """What a restarted application offers to restore."""

    module_path: str | None = None
    source_path: str | None = None
    device: str = "local-sync"
    function: str | None = None
    inputs: list[str] = field(default_factory=list)
    breakpoints: list[dict[str, Any]] = field(default_factory=list)
    compile_options: dict[str, Any] = field(default_factory=dict)
    edited_sources: dict[str, str] = field(default_factory=dict)  # name -> file under sources/
    traces: list[str] = field(default_factory=list)  # paths of saved captures
    parameters: list[str] = field(default_factory=list)  # the module's [SCOPE=]FILE parameter archives
    executable_plugins: list[str] = field(default_factory=list)  # what its CPU kernels import functions from


class SessionStore:
    """Saves a ``SavedSession`` and edited sources under ``root`` on every change."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else default_state_dir()
        self.session = SavedSession()

    @property
    def session_file(self) -> Path:
        return self.root / "session.json"

    def has_saved_session(self) -> bool:
        return self.session_file.exists()

    def load(self) -> SavedSession:
        """The saved session; an unreadable file gives an empty session rather than an error."""
        try:
            data = json.loads(self.session_file.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("the session file does not hold a JSON object")
            known = {k: v for k, v in data.items() if k in SavedSession.__dataclass_fields__}
            self.session = SavedSession(**known)
        except (OSError, ValueError, TypeError):
            self.session = SavedSession()
        return self.session

    def save(self) -> None:
        atomic_write(self.session_file, json.dumps(asdict(self.session), indent=2))

    def update(self, **changes: Any) -> None:
        for key, value in changes.items():
            if key not in SavedSession.__dataclass_fields__:
                raise KeyError(f"unknown session field {key!r}")
            setattr(self.session, key, value)
        self.save()

    def save_source(self, name: str, text: str) -> Path:
        """Save an edited source (an executable's MLIR/LLVM IR, a phase snapshot) under ``name``."""
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
        path = self.root / "sources" / safe
        atomic_write(path, text)
        self.session.edited_sources[name] = str(path)
        self.save()
        return path

    def read_source(self, name: str) -> str:
        return Path(self.session.edited_sources[name]).read_text(encoding="utf-8")

    def clear(self) -> None:
        self.session = SavedSession()
        for path in (self.root / "sources").glob("*") if (self.root / "sources").exists() else []:
            path.unlink(missing_ok=True)
        self.session_file.unlink(missing_ok=True)
