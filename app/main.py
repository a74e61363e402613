"""Starting the application: ``run_app(argv)`` opens the main window (on a file given as argument)."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.qt_none_refcount import pin_none
from app.settings import APPLICATION, ORGANIZATION


def configure_pyqtgraph() -> None:
    """Once per process: tensors are row-major numpy arrays, and pyqtgraph must not transpose them."""
    import pyqtgraph as pg

    pg.setConfigOptions(imageAxisOrder="row-major", antialias=True)


def make_application(argv: list[str] | None = None) -> QApplication:
    # Every Qt view paints; pin None before any widget exists (see app/qt_none_refcount.py).
    pin_none()
    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "iree-lens", *(argv or [])])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName(APPLICATION)
    configure_pyqtgraph()
    # Qt objects must never be destroyed by a collection that happens to run on a worker thread.
    from app.gui_gc import collect_on_gui_thread

    collect_on_gui_thread()
    return app


def start_app(argv: list[str]):
    """Create the application and show the main window, opening the file named in ``argv`` if any.

    Returns ``(app, window)``; :func:`run_app` then runs the event loop (tests drive it themselves).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="iree-lens", description="Open IREE Lens (on FILE if given).")
    parser.add_argument("file", nargs="?", help="a .vmfb module or an .mlir source")
    parser.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE",
                        help="a parameter archive the program loads its weights from, as iree-run-module takes it")  # fmt: skip
    parser.add_argument("--executable-plugin", "--executable_plugin", dest="executable_plugins", action="append",
                        default=[], metavar="FILE.so",
                        help="a library providing functions the program's CPU kernels import, as iree-run-module's "
                        "--executable_plugin")  # fmt: skip
    args, qt_args = parser.parse_known_args(argv)
    app = make_application(qt_args)
    from app.main_window import MainWindow

    window = MainWindow()
    if window.has_saved_geometry:
        window.show()
    else:
        window.showMaximized()  # a first start fills the screen, whatever its size
    if args.parameters:
        window.session_bridge.set_parameters([_absolute_archive(p) for p in args.parameters])
    if args.executable_plugins:
        from engine.runtime.hal.executable_plugins import absolute_plugin

        window.session_bridge.add_executable_plugins([absolute_plugin(p) for p in args.executable_plugins])
    if args.file:
        window.open_file(args.file)
    return app, window


def _absolute_archive(spec: str) -> str:
    """``[SCOPE=]FILE`` with FILE absolute (the session process may run elsewhere than this directory)."""
    from engine.runtime.parameters import ParameterSpec

    parsed = ParameterSpec.parse(spec)
    return str(ParameterSpec(parsed.scope, str(Path(parsed.path).resolve())))


def run_app(argv: list[str]) -> int:
    """Open the window; ``argv`` may hold one file to open (``.vmfb``, or ``.mlir`` to compile first)."""
    app, window = start_app(argv)
    return app.exec()
