"""Turning a file the user opened into a :class:`~app.context.LoadedModule` (runs on the worker).

A ``.vmfb`` is parsed by the engine's reader. A ``.mlir`` source is compiled first: through
``engine.compiler`` once it offers a one-shot compile, until then with the real ``iree-compile``
installed beside this interpreter, for the llvm-cpu target.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from app.context import LoadedModule
from app.workers import Cancelled, TaskState
from engine.errors import CompileError, LensError

MODULE_SUFFIXES = (".vmfb",)
SOURCE_SUFFIXES = (".mlir", ".mlirbc")
OPENABLE_SUFFIXES = MODULE_SUFFIXES + SOURCE_SUFFIXES
DEFAULT_SOURCE_TARGET = "llvm-cpu"


class UnsupportedFileError(LensError):
    """The application does not know how to open this kind of file."""


def load_file(path: str | Path, task: TaskState | None = None) -> LoadedModule:
    """Open ``path`` (a ``.vmfb``, or an ``.mlir`` to compile) and parse its module."""
    path = Path(path)
    if not path.exists():
        raise LensError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix in SOURCE_SUFFIXES:
        vmfb = compile_source(path, task=task)
        return LoadedModule(path=vmfb, module=open_module(vmfb), source=path)
    if suffix in MODULE_SUFFIXES or _looks_like_vmfb(path):
        return LoadedModule(path=path, module=open_module(path))
    raise UnsupportedFileError(f"cannot open {path.name}: expected a .vmfb module or an .mlir source")


def open_module(path: Path):
    """Parse a ``.vmfb`` with the engine's reader, touching the parts the tree shows first.

    The reader is lazy: reading the top-level lists here, on the worker, makes a broken file fail
    here (one typed error) rather than later on the GUI thread.
    """
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(path)
    for name in ("name", "version", "imports", "exports", "functions", "rodata_segments", "executables"):
        getattr(module, name, None)
    return module


def _looks_like_vmfb(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith(b"PK\x03\x04") and b"module.fb" in head


def compile_source(source: Path, target: str = DEFAULT_SOURCE_TARGET, task: TaskState | None = None) -> Path:
    """Compile ``source`` with the real ``iree-compile`` for ``target``; returns the ``.vmfb``.

    Stopgap until the app drives ``engine.compiler``: the output goes to a cache folder named by the
    source's content, so opening the same source twice compiles once.
    """
    from engine.compiler.targets import target_flags

    flags = target_flags(target)
    digest = hashlib.sha256(source.read_bytes() + "\0".join(flags).encode()).hexdigest()[:16]
    out_dir = Path(tempfile.gettempdir()) / "iree-lens-compiled"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{source.stem}.{target}.{digest}.vmfb"
    if out.exists():
        return out
    tool = Path(sys.executable).parent / "iree-compile"
    cmd = [str(tool) if tool.exists() else "iree-compile", str(source), *flags]
    cmd += ["--mlir-print-op-on-diagnostic=false", "-o", str(out.with_suffix(".partial"))]
    if task is not None:
        task.progress(0.0, f"compiling {source.name} for {target}")
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise CompileError(f"cannot run iree-compile: {e}") from e
    while True:
        try:
            _, stderr = proc.communicate(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            if task is not None and task.cancelled:
                proc.kill()
                proc.communicate()
                raise Cancelled() from None
    if proc.returncode != 0:
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "no message")
        raise CompileError(f"iree-compile failed on {source.name}: {first}", lines)
    out.with_suffix(".partial").replace(out)
    if task is not None:
        task.progress(1.0, f"compiled {source.name}")
    return out
