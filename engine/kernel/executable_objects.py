"""Object files a CPU executable links in: code IREE did not generate (IREE's ``custom_dispatch`` samples, a
hand-written microkernel), named in the executable's source by ``hal.executable.variant ... objects([
#hal.executable.object<{path = "functions_x86_64.o"}>])``.

IREE finds such a path as given, else in each ``--iree-hal-executable-object-search-path``. IREE Lens looks
where that compile most likely ran: the folder the program's compile ran in (``program_as_named``), the module's
and the source's folders, the current folder. The kernel stepper links them into its instrumented build; their
own code has no IR, so it runs unrecorded."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_OBJECT = re.compile(r"#hal\.executable\.object<\{([^}]*)\}>")
_PATH = re.compile(r'\bpath\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ExecutableObjects:
    """The object files an executable's source names: ``found`` here, ``missing`` (as named) not, and
    ``embedded``: objects whose bytes the source holds itself (``data = ...``), which IREE Lens cannot link."""

    found: tuple[Path, ...] = ()
    missing: tuple[str, ...] = ()
    embedded: int = 0

    @property
    def named(self) -> bool:
        return bool(self.found or self.missing or self.embedded)


def declared_objects(source: str) -> tuple[list[str], int]:
    """The paths of the objects ``source`` names, in order, and how many it embeds (no path)."""
    paths, embedded = [], 0
    for m in _OBJECT.finditer(source):
        path = _PATH.search(m[1])
        if path:
            paths.append(path[1])
        else:
            embedded += 1
    return paths, embedded


def search_folders(module_path: str | Path, source: str | Path | None = None) -> list[Path]:
    """Where the objects a module's executables name are looked for, in order (duplicates dropped)."""
    from engine.dispatch.rebuild_sources import program_as_named

    module = Path(module_path).absolute()
    named = program_as_named(module)
    candidates = [named[1] if named else None, named[0].parent if named else None, module.parent,
                  Path(source).absolute().parent if source is not None else None, Path.cwd()]  # fmt: skip
    folders: list[Path] = []
    for folder in candidates:
        if folder is not None and folder not in folders:
            folders.append(folder)
    return folders


def find_objects(source_path: str | Path, folders: Iterable[Path]) -> ExecutableObjects:
    """The objects the executable source at ``source_path`` names, looked up as IREE does in ``folders``."""
    try:
        paths, embedded = declared_objects(Path(source_path).read_text(errors="replace"))
    except OSError:
        return ExecutableObjects()
    folders = list(folders)
    found, missing = [], []
    for name in paths:
        path = Path(name)
        where = [path] if path.is_absolute() else [folder / path for folder in folders]
        hit = next((p for p in where if p.is_file()), None)
        if hit is None:
            missing.append(name)
        else:
            found.append(hit)
    return ExecutableObjects(tuple(found), tuple(missing), embedded)


def search_path_flags(folders: Iterable[Path]) -> list[str]:
    """``iree-compile`` flags that let a compile of the executable's source alone find its objects."""
    return [f"--iree-hal-executable-object-search-path={folder}" for folder in folders]


def executable_source_of(ir: Path) -> Path | None:
    """The ``hal.executable`` source the IR's debug locations name, where it is here; None when they name
    the program the executables came from, or nothing here."""
    files = {m.group(2) + "/" + m.group(1) if not m.group(1).startswith("/") else m.group(1)
             for m in re.finditer(r'!DIFile\(filename: "([^"]*)", directory: "([^"]*)"', ir.read_text(errors="replace"))
             if m.group(1) not in ("-", "") and not m.group(1).endswith(".h")}  # fmt: skip
    for name in sorted(files):
        try:
            with open(name, errors="replace") as f:
                if "hal.executable" in f.read(4096):
                    return Path(name)
        except OSError:
            continue
    return None
