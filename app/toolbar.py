"""The main window's toolbar: Open, Compile, Run, the stepper's step/continue/stop actions (they carry the
debugger keys) and the Inputs menu (made from the signature, or loaded from numpy files)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QToolBar, QToolButton

from app.input_defaults import FILLS

if TYPE_CHECKING:
    from app.main_window import MainWindow


def _window_action(
    window: MainWindow, bar: QToolBar, text: str, shortcut: str, tip: str, slot: Callable[[], object]
) -> QAction:
    """An action of the window (its shortcut works wherever focus is) shown on ``bar``."""
    action = QAction(text, window)
    action.setShortcut(QKeySequence(shortcut))
    action.setToolTip(tip)
    action.triggered.connect(slot)
    window.addAction(action)
    bar.addAction(action)
    return action


def build_main_toolbar(window: MainWindow) -> QToolBar:
    bar = QToolBar("Main", window)
    bar.setObjectName("toolbar-main")
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    bar.setIconSize(QSize(16, 16))
    window.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
    bar.addAction(window.open_action)
    window.compile_action = _window_action(
        window, bar, "Compile", "Ctrl+B", "Compile the open program with the compile panel's options (Ctrl+B)",
        window.compile_current,
    )  # fmt: skip
    stepper = window.panels.get("stepper")
    if stepper is None:
        return bar
    bar.addSeparator()
    window.run_action = _window_action(
        window, bar, "▶ Run", "Ctrl+R", "Run the chosen function; empty inputs are made from its signature (Ctrl+R)",
        window.run_function,
    )  # fmt: skip
    window.profile_action = _window_action(
        window, bar, "Profile", "Ctrl+Shift+R",
        "Profile this run: the function with its inputs, timed by IREE's HAL profiling, into the Zones view "
        "(Ctrl+Shift+R)",
        window.profile_current_run,
    )  # fmt: skip
    # The stepper's own actions (they carry the debugger keys: F5, F10, F11, Shift+F11, Shift+F5).
    for name in ("step_over_action", "step_into_action", "step_out_action", "continue_action", "stop_action"):
        action = getattr(stepper, name, None)
        if action is not None:
            bar.addAction(action)
    _add_run_menu(window, stepper)
    bar.addSeparator()
    inputs = QMenu("Inputs", window)
    for fill in FILLS:
        inputs.addAction(f"Fill with {fill}", lambda f=fill: window.run_inputs and window.run_inputs.prefill(fill=f))
    inputs.addSeparator()
    inputs.addAction("Load .npy / .npz...", window.load_numpy_dialog)
    button = QToolButton(window)
    button.setText("Inputs")
    button.setToolTip("Fill the function's inputs from its signature, or load them from numpy files")
    button.setMenu(inputs)
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    bar.addWidget(button)
    window.inputs_menu = inputs
    return bar


_RUN_MENU = (
    ("continue_action", "step_over_action", "step_into_action", "step_out_action", "run_to_cursor_action",
     "next_dispatch_action", "stop_action"),
    ("reverse_continue_action", "reverse_step_over_action", "reverse_step_into_action", "reverse_step_out_action",
     "previous_dispatch_action"),
    ("toggle_bp_action",),
    ("debug_initializer_action",),
)  # fmt: skip


def _add_run_menu(window: MainWindow, stepper) -> None:
    """A Run menu before Help with every run and step action and its key (on the toolbar and in the stepper
    only, they were found by those who already knew them)."""
    menu = QMenu("&Run", window)
    for action in (window.compile_action, window.run_action, window.profile_action):
        menu.addAction(action)
    reverse = getattr(stepper, "reverse", None)
    for group, owner in zip(_RUN_MENU, (stepper, reverse, stepper, stepper)):
        found = [a for a in (getattr(owner, name, None) for name in group) if a is not None]
        if found:
            menu.addSeparator()
            menu.addActions(found)
    bar = window.menuBar()
    help_menu = next((a for a in bar.actions() if a.text() == "&Help"), None)
    if help_menu is not None:
        bar.insertMenu(help_menu, menu)
    else:
        bar.addMenu(menu)
    window.run_menu = menu
