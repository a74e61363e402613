"""IREE Lens, the Qt application (the only package that imports Qt)."""

# Every Qt view paints; PySide6 6.12 on CPython 3.11 leaks references to None on void QPainter calls,
# so pin None before any widget exists (see app/qt_none_refcount.py).
import app.qt_none_refcount  # noqa: F401
