"""A line (two where one does not hold it) over the documents when the open module was built for another device than the selected one:
what it needs, and the two ways out (switch the device, or recompile the source for the selected one)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

_STYLE = "#deviceMismatchBar { background:#fff3cd; border-bottom:1px solid #ffe69c; } QLabel { color:#664d03; }"


class DeviceMismatchBar(QFrame):
    def __init__(
        self,
        switch: Callable[[], None],
        recompile: Callable[[], None],
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.setObjectName("deviceMismatchBar")
        self.setStyleSheet(_STYLE)
        self.label = QLabel(self)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.label.setWordWrap(True)  # the whole reason, on two lines where one does not hold it (1366 wide)
        self.switch_button = QPushButton("Switch device", self)
        self.switch_button.setObjectName("mismatchSwitch")
        self.switch_button.clicked.connect(switch)
        self.recompile_button = QPushButton("Recompile", self)
        self.recompile_button.setObjectName("mismatchRecompile")
        self.recompile_button.clicked.connect(recompile)
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 3, 6, 3)
        row.addWidget(self.label, 1)
        row.addWidget(self.switch_button)
        row.addWidget(self.recompile_button)
        self.hide()

    def show_mismatch(self, text: str, switch_to: str | None, recompile_for: str | None) -> None:
        """``switch_to``: the device URI that runs the module (None: none listed); ``recompile_for``: the
        device the source can be recompiled for (None: no source)."""
        self.label.setText(text)
        self.label.setToolTip(text)
        self.switch_button.setVisible(switch_to is not None)
        self.switch_button.setText(f"Switch to {switch_to}" if switch_to else "Switch device")
        self.recompile_button.setVisible(recompile_for is not None)
        self.recompile_button.setText(f"Recompile for {recompile_for}" if recompile_for else "Recompile")
        self.show()
