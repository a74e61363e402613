"""Queries about the module itself, answered from the ``.vmfb`` file where the session runs.

A client on another machine (``--remote``) cannot read the module: the session server answers these
from its own files (``engine.session.stream``): the disassembly of the last ``Open``'s module, and a
module file's bytes (``ReadModuleFile``: the window fetches a remote module once and reads its tables,
disassembly and executables from that copy, while the session runs the file on the remote side). An
in-process client calls ``answer`` itself.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from engine.errors import LensError
from engine.session.protocol import Answer, Disassembly, ModuleFile, Query, ReadDisassembly, ReadModuleFile


def disassembly(module_path: str, query: ReadDisassembly) -> Disassembly:
    from engine.runtime.vmfb.disassembler import function_lines
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(module_path)
    try:
        lines = function_lines(module, query.function)
    except (KeyError, IndexError, ValueError):
        raise LensError(f"no function {query.function!r} in {module_path}") from None
    return Disassembly(query, query.function, tuple((line.pc, line.text) for line in lines))


def module_file(query: ReadModuleFile) -> ModuleFile:
    """The file's bytes as a read-only map (sent from the page cache, no copy); ``LensError`` when it
    is not a readable IREE module."""
    path = Path(query.path).expanduser().absolute()
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not path.is_file() or size == 0:
                raise LensError(f"{path} is not a module file")
            data = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
    except OSError as e:
        raise LensError(f"cannot read {path}: {e.strerror or e}") from None
    if not _is_module(data):
        raise LensError(f"{path} is not an IREE module (.vmfb)")
    return ModuleFile(query, str(path), data)


def _is_module(data: np.ndarray) -> bool:
    """A .vmfb: a FlatBuffer with IREE's ``IREE`` file identifier, possibly inside a zip archive."""
    head = bytes(data[:64])
    return head[4:8] == b"IREE" or (head.startswith(b"PK\x03\x04") and b"module.fb" in head)


def answer(query: Query, module_path: str | None) -> Answer:
    """The answer to one of ``QUERIES``; ``module_path``: the open module (``LensError`` without one)."""
    if isinstance(query, ReadModuleFile):
        return module_file(query)
    if module_path is None:
        raise LensError("no module is open")
    return disassembly(module_path, query)


# The queries answered here (their messages are in ``engine.session.protocol`` with the others).
QUERIES = (ReadDisassembly, ReadModuleFile)
__all__ = [
    "QUERIES",
    "Disassembly",
    "ModuleFile",
    "ReadDisassembly",
    "ReadModuleFile",
    "answer",
    "disassembly",
    "module_file",
]
