"""Inputs of the function to run, filled in for the user: made from the function's signature (zeros, ones
or random values of the right shapes and types), loaded from ``.npy``/``.npz``, and remembered per module
and function (the last inputs a function ran with come back when it is chosen again).

Works on the stepper's run bar through its public widgets (function choice, inputs line, Run button):
the stepper keeps owning its inputs; this only writes the line while it is empty or still holds what
this wrote itself, so a user's typing or a restored session is never overwritten.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QSettings, QTimer

from app.input_defaults import default_inputs, numpy_inputs
from app.views.stepper_inputs import format_inputs_line, parse_inputs_line

_GROUP = "inputs"


class RunInputs(QObject):
    def __init__(self, stepper, context, store: QSettings, folder: Path | None = None, parent=None):
        super().__init__(parent)
        self.stepper = stepper
        self.context = context
        self.store = store
        self.folder = folder  # where large random tensors are written (a temporary folder by default)
        self._written: str | None = None  # the line as this object last wrote it
        self.fill = "zeros"
        stepper.function_combo.currentTextChanged.connect(self._on_function)
        # The stepper fills its function list and restores the last call when a module opens: fill after it.
        bridge = getattr(stepper, "bridge", None)
        for signal in ("opened", "callChanged"):
            if bridge is not None and hasattr(bridge, signal):
                getattr(bridge, signal).connect(lambda *_: QTimer.singleShot(0, self._after_open))
        stepper.run_button.clicked.connect(self.remember)
        stepper.inputs_edit.returnPressed.connect(self.remember)

    # -- where things are remembered -------------------------------------------------------------

    def _module_name(self) -> str | None:
        loaded = self.context.module
        return getattr(getattr(loaded, "module", None), "name", None) if loaded is not None else None

    def _key(self, function: str) -> str | None:
        module = self._module_name()
        return f"{_GROUP}/{module}/{function}" if module and function else None

    def remembered(self, function: str) -> tuple[str, ...] | None:
        key = self._key(function)
        value = self.store.value(key) if key else None
        return parse_inputs_line(value) if isinstance(value, str) and value.strip() else None

    def remember(self) -> None:
        """Keep the inputs line for the current module and function (called when a run starts)."""
        key = self._key(self.stepper.function_combo.currentText())
        if key:
            self.store.setValue(key, self.stepper.inputs_edit.text())
            self.store.sync()

    # -- filling ---------------------------------------------------------------------------------

    def _is_ours(self) -> bool:
        text = self.stepper.inputs_edit.text().strip()
        return not text or text == self._written

    def _write(self, inputs: tuple[str, ...]) -> None:
        self.stepper.set_inputs(inputs)
        self._written = self.stepper.inputs_edit.text().strip()

    def _after_open(self) -> None:
        self._on_function(self.stepper.function_combo.currentText())

    def _on_function(self, function: str) -> None:
        if function and self._is_ours():
            self.prefill(function)

    def prefill(self, function: str | None = None, fill: str | None = None) -> tuple[str, ...] | None:
        """Write the remembered inputs of ``function`` (the chosen one by default) or, with none or with
        ``fill`` given, inputs made from its signature; returns them (``None``: signature unknown)."""
        function = function or self.stepper.function_combo.currentText()
        loaded = self.context.module
        if not function or loaded is None:
            return None
        inputs = self.remembered(function) if fill is None else None
        if inputs is None:
            if fill is not None:
                self.fill = fill
            inputs = default_inputs(loaded.module, function, self.fill, folder=self.folder)
        if inputs is not None:
            self._write(inputs)
        return inputs

    def load_numpy(self, path: str | Path) -> tuple[str, ...]:
        inputs = numpy_inputs(Path(path))
        self._write(inputs)
        return inputs

    def ensure(self) -> None:
        """Before a run: fill an empty inputs line so the function runs without typing."""
        if not self.stepper.inputs_edit.text().strip():
            self.prefill()

    @staticmethod
    def line(inputs: tuple[str, ...]) -> str:
        return format_inputs_line(inputs)
