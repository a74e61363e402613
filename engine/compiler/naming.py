"""The name IREE gives a compiled module, which names its phase snapshots, its ``.vmfb`` module and its
executables: the ``sym_name`` of the top-level ``module @name`` when the source declares one (as
iree-turbine's ``module @module { ... }`` does), otherwise the input file's stem with every character
other than a letter, digit or ``_`` turned into ``_`` (``my.model.mlir`` → ``my_model``).
"""

from __future__ import annotations

import re
from pathlib import Path

# Enough of a file to reach its first operation past comments and attribute aliases.
_HEAD_BYTES = 1 << 16
_TOP_LEVEL_MODULE = re.compile(r'(?:builtin\.)?module\s*(?:@(?P<bare>[\w$.-]+)|@"(?P<quoted>[^"]*)")?')


def _first_operation(text: str) -> str:
    """The text from the first operation on: comments, blank lines and ``#alias = ...`` lines skipped."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("//") or stripped.startswith("#") or stripped.startswith("!"):
            continue
        return stripped
    return ""


def declared_module_name(text: str) -> str | None:
    """The ``@name`` of the source's top-level ``module``, or ``None`` when it has none (or is not one)."""
    m = _TOP_LEVEL_MODULE.match(_first_operation(text))
    if m is None:
        return None
    return m["bare"] or m["quoted"]


def stem_module_name(file_name: str) -> str:
    """The module name IREE derives from an input file name with no named module in it."""
    stem = file_name.rsplit(".", 1)[0] if "." in file_name else file_name
    return re.sub(r"[^A-Za-z0-9_]", "_", stem) or "module"


def read_head(path: Path) -> str | None:
    """The start of a textual MLIR file, or ``None`` for bytecode (``ML\\xefR``) or an unreadable file."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return None
    if head.startswith(b"ML\xefR"):
        return None
    return head.decode("utf-8", errors="replace")

