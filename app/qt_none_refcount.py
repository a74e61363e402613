"""Work around a PySide6 6.12 / CPython 3.11 reference-count bug that aborts the process.

In PySide6 6.12.0 on CPython 3.11, void ``QPainter`` methods (``setPen``, ``setFont``, ``setBrush``,
``fillRect``, ``drawRect``, ...) return ``None`` without taking a reference to it. Every call therefore
removes one reference from ``None``; after a few thousand painted items ``None``'s count reaches zero
and CPython aborts with "Fatal Python error: none_dealloc". (Measured: 1000 ``painter.setPen(color)``
calls lower ``sys.getrefcount(None)`` by 1000.) CPython 3.12 made ``None`` immortal, which is what this
does by hand: it adds 2**40 references once, so ``None`` can never reach zero in a process's life.

It runs when the window's application starts (``app.main.make_application``), not on import: the
command line imports parts of ``app`` too and must leave the interpreter as it is.
"""

from __future__ import annotations

import ctypes
import sys

_PINNED = 1 << 40


def pin_none() -> None:
    """Make the reference counts of ``None``, ``True`` and ``False`` unreachably high (no-op where CPython
    makes them immortal). The booleans too: the same binding bug drops references to ``True``/``False``
    returned by bool-returning Qt calls, which aborted a test run at exit with "bool_dealloc"."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    for singleton in (None, True, False):
        refcount = ctypes.c_ssize_t.from_address(id(singleton))  # ob_refcnt is a PyObject's first field
        if refcount.value < _PINNED:
            refcount.value += _PINNED
