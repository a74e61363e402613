"""Turning a file the user opened into a :class:`~app.context.LoadedModule` (runs on the worker).

A ``.vmfb`` is parsed by the engine's reader. A ``.mlir`` source is compiled first by the engine's
compile job (``engine.compiler.compile_program``) for the target of the selected device (``llvm-cpu`` for
the CPU, ``vulkan-spirv`` for a Vulkan device), which keeps its phase snapshots and timing: the window
opens them as documents.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from app.context import LoadedModule
from engine.compiler import Compilation, CompileRequest, TaskState, compile_program, load_compilation
from engine.compiler.job import compiler_version
from engine.errors import CompileCancelled, CompileError, LensError
from engine.folder_lock import folder_lock
from engine.temp_caches import cache_root

MODULE_SUFFIXES = (".vmfb",)
SOURCE_SUFFIXES = (".mlir", ".mlirbc")
OPENABLE_SUFFIXES = MODULE_SUFFIXES + SOURCE_SUFFIXES
DEFAULT_SOURCE_TARGET = "llvm-cpu"


class UnsupportedFileError(LensError):
    """The application does not know how to open this kind of file."""


def load_file(
    path: str | Path, task: TaskState | None = None, target: str = DEFAULT_SOURCE_TARGET
) -> LoadedModule:
    """Open ``path`` (a ``.vmfb``, or an ``.mlir`` to compile for ``target``) and parse its module."""
    path = Path(path)
    if not path.exists():
        raise LensError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix in SOURCE_SUFFIXES:
        compilation = compile_source(path, target=target, task=task)
        vmfb = compilation.vmfb_path
        module = open_module(vmfb)
        return LoadedModule(vmfb, module, source=path, compilation=compilation, global_names=_names(vmfb, module))
    if suffix in MODULE_SUFFIXES or _looks_like_vmfb(path):
        module = open_module(path)
        return LoadedModule(path=path, module=module, global_names=_names(path, module))
    raise UnsupportedFileError(f"cannot open {path.name}: expected a .vmfb module or an .mlir source")


def _names(path: Path, module):
    """The names of the module's globals from the VM phase beside it (here, on the worker: a large model's
    snapshot is tens of MB); None when the module cannot say its counts."""
    from engine.runtime.vmfb.global_names import names_beside

    try:
        return names_beside(path, module)
    except Exception:  # a module the reader lists but cannot walk: no names, the disassembly as IREE's
        return None


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


def compile_source(source: Path, target: str = DEFAULT_SOURCE_TARGET, task: TaskState | None = None) -> Compilation:
    """Compile ``source`` for ``target`` through the engine's compile job (every phase snapshot, the
    executables and the pass timing are captured); returns the ``Compilation``.

    The results go to a folder named by the source's content, the flags and the compiler
    (``$TMPDIR/iree-lens-compiled``, pruned of what is a week unused): opening the same source again, in
    this process or another, reads that compile back instead of compiling again (and adds nothing to the
    folder). A failed compile raises ``CompileError`` with IREE's first error.
    """
    request = CompileRequest.from_file(source, target=target)
    # The path too: the build's debug locations name the file, which the window reads its lines from.
    key = "\0".join([compiler_version(), str(source.resolve()), *request.compiler_flags()]).encode()
    digest = hashlib.sha256(source.read_bytes() + b"\0" + key).hexdigest()[:16]
    cached = _CACHE.get(digest)
    if cached is not None and cached.vmfb_path is not None and cached.vmfb_path.exists():
        return cached
    out = cache_root("iree-lens-compiled") / f"{request.module_name}.{target}.{digest}"
    # Another window compiling the same source into the same folder: this one waits and reads it back.
    with folder_lock(out, (lambda: task.cancelled) if task is not None else None) as held:
        if not held:
            raise CompileCancelled("cancelled")
        compilation = load_compilation(request, out)
        if compilation is None:
            shutil.rmtree(out, ignore_errors=True)  # a compile that failed or did not finish
            if task is not None:
                task.progress(0.0, f"compiling {source.name} for {target}")
            compilation = compile_program(request, out_dir=out, task=task)
    if not compilation.ok or compilation.vmfb_path is None:
        errors = [str(d) for d in compilation.errors] or [compilation.stderr().strip() or "no message"]
        raise CompileError(f"iree-compile failed on {source.name}: {errors[0]}", errors)
    _CACHE[digest] = compilation
    return compilation


# Compilations of this process by source content and flags: a second open of the same source reuses the result.
_CACHE: dict[str, Compilation] = {}
