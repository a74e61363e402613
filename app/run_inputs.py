"""Inputs of the function to run, filled in for the user: made from the function's signature (zeros, ones
or random values of the right shapes and types), loaded from ``.npy``/``.npz``, and remembered per file
(its path and content hash, not the module's name: every PyTorch export is ``@module``) and function.
Remembered inputs come back only where they fit the function's signature.

Works on the stepper's run bar through its public widgets (function choice, inputs line, Run button):
the stepper keeps owning its inputs line; this only writes the line while it is empty or still holds what
this wrote itself, so a user's typing or a restored session is never overwritten. Before a run it fills an
empty line from the signature (``ensure``), so a first run needs no typing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QSettings, QTimer

from app.input_defaults import Argument, default_inputs, function_arguments, numpy_inputs
from app.views.stepper_inputs import format_inputs_line, parse_inputs_line

_GROUP = "inputs"


def _dims(shape: tuple[int, ...] | None) -> str:
    return "scalar" if shape is None else "x".join(map(str, shape)) or "0-d"


def input_shape(value: str) -> tuple[tuple[int, ...] | None, str | None] | None:
    """(shape, element type) of one ``--input`` value, as far as it says: ``2x3xf32=...`` gives both,
    ``@x.npy`` its array's; a plain number is a scalar; ``None`` when it cannot be told."""
    value = value.strip()
    if value.startswith("@"):
        path = Path(value[1:])
        if path.suffix.lower() != ".npy":
            return None
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return tuple(array.shape), None
    if "=" in value:
        head = value.split("=", 1)[0]
        parts = head.split("x")
        try:
            return tuple(int(p) for p in parts[:-1]), parts[-1]
        except ValueError:
            return None
    return (None, None) if value else None


def misfit(args: list[Argument] | None, inputs: tuple[str, ...], function: str) -> str | None:
    """Why ``inputs`` do not fit ``function``'s arguments (None: they fit, or the signature is unknown)."""
    if args is None:
        return None
    if len(inputs) != len(args):
        return f"{function} takes {len(args)} input{'s' if len(args) != 1 else ''}, {len(inputs)} given"
    for i, (arg, value) in enumerate(zip(args, inputs)):
        found = input_shape(value)
        if found is None:
            continue
        shape, element = found
        if arg.is_tensor and shape is not None and tuple(shape) != tuple(arg.shape):
            return f"input {i} is {_dims(shape)}, {function} takes {_dims(arg.shape)}x{arg.element_type}"
        if element is not None and arg.is_tensor and element != arg.element_type:
            return f"input {i} is {element}, {function} takes {arg.element_type}"
    return None


class RunInputs(QObject):
    def __init__(self, stepper, context, store: QSettings, folder: Path | None = None, parent=None, workbench=None):
        super().__init__(parent)
        self.stepper = stepper
        self.context = context
        self.store = store
        self.workbench = workbench if workbench is not None else getattr(stepper, "workbench", None)
        self.folder = folder  # where large random tensors are written (a temporary folder by default)
        self._written: str | None = None  # the line as this object last wrote it
        self.fill = "zeros"
        stepper.function_combo.currentTextChanged.connect(self._on_function)
        # The stepper fills its function list and restores the last call when a module opens: fill after it.
        bridge = getattr(stepper, "bridge", None)
        for signal in ("opened", "callChanged"):
            if bridge is not None and hasattr(bridge, signal):
                getattr(bridge, signal).connect(lambda *_: QTimer.singleShot(0, self._after_open))
        if self.workbench is not None:
            self.workbench.moduleReset.connect(lambda _m: setattr(self, "_written", None))
        if hasattr(stepper, "before_run"):
            stepper.before_run.append(self.before_run)
        else:  # an older stepper: remember on click, as before
            stepper.run_button.clicked.connect(self.remember)
        stepper.inputs_edit.returnPressed.connect(self.remember)

    # -- where things are remembered -------------------------------------------------------------

    def _file_key(self) -> str | None:
        if self.workbench is not None:
            identity = self.workbench.identity()
        else:
            loaded = self.context.module
            identity = str(loaded.path) if loaded is not None else None
        if not identity:
            return None
        # QSettings keys: no slashes inside a part.
        return identity.replace("/", "|").replace("\\", "|")

    def _key(self, function: str) -> str | None:
        key = self._file_key()
        return f"{_GROUP}/{key}/{function}" if key and function else None

    def arguments(self, function: str) -> list[Argument] | None:
        loaded = self.context.module
        return function_arguments(loaded.module, function) if loaded is not None else None

    def remembered(self, function: str) -> tuple[str, ...] | None:
        """The inputs ``function`` of this file last ran with, if they still fit its signature."""
        key = self._key(function)
        value = self.store.value(key) if key else None
        if not (isinstance(value, str) and value.strip()):
            return None
        inputs = parse_inputs_line(value)
        return None if misfit(self.arguments(function), inputs, function) else inputs

    def remember(self) -> None:
        """Keep the inputs line for the current file and function (called when a run starts)."""
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
        if self.workbench is not None:
            self.workbench.set_call(self.stepper.function_combo.currentText(), inputs)

    def _after_open(self) -> None:
        self._on_function(self.stepper.function_combo.currentText())

    def _on_function(self, function: str) -> None:
        if function and self._is_ours():
            self.prefill(function)
        elif function and self.workbench is not None:
            self.workbench.set_call(function, self.stepper.inputs)

    def prefill(self, function: str | None = None, fill: str | None = None) -> tuple[str, ...] | None:
        """Write the remembered inputs of ``function`` (the chosen one by default) or, with none or with
        ``fill`` given, inputs made from its signature; returns them (``None``: signature unknown, and
        the reason is said)."""
        function = function or self.stepper.function_combo.currentText()
        loaded = self.context.module
        if loaded is None:
            self._say("No module is open: open one first, then fill its inputs.")
            return None
        if not function:
            self._say("The module has no function to fill inputs for.")
            return None
        inputs = self.remembered(function) if fill is None else None
        if inputs is None:
            if fill is not None:
                self.fill = fill
            inputs = default_inputs(loaded.module, function, self.fill, folder=self.folder)
        if inputs is None:
            self._say(
                f"{function}: its inputs' shapes are not stated in the module (no signature, no shape checks);"
                " type them (iree-run-module syntax) or load a .npy"
            )
            return None
        self._write(inputs)
        if fill is not None:
            self._say(f"{function}: inputs filled with {fill} ({len(inputs)} input{'s' if len(inputs) != 1 else ''})")
        return inputs

    def load_numpy(self, path: str | Path) -> tuple[str, ...]:
        inputs = numpy_inputs(Path(path))
        function = self.stepper.function_combo.currentText()
        why = misfit(self.arguments(function), inputs, function) if function else None
        self._write(inputs)
        if why:
            self._say(f"{Path(path).name} does not fit {function}: {why}")
        return inputs

    def ensure(self) -> None:
        """Before a run: fill an empty inputs line so the function runs without typing."""
        if not self.stepper.inputs_edit.text().strip():
            self.prefill()

    def before_run(self) -> str | None:
        """The stepper's check before a run: fill an empty line from the signature, remember the line; the
        reason when a function that takes inputs has none."""
        function = self.stepper.function_combo.currentText()
        if not self.stepper.inputs_edit.text().strip():
            args = self.arguments(function)
            if args is None:
                if self._takes_inputs(function):
                    return (
                        f"{function} takes inputs whose shapes the module does not state: type them"
                        " (iree-run-module syntax) or use Inputs > Load .npy"
                    )
            elif args:
                self.prefill(function)
        self.remember()
        if self.workbench is not None:
            self.workbench.set_call(function, self.stepper.inputs)
        return None

    def _takes_inputs(self, function: str) -> bool:
        loaded = self.context.module
        for export in getattr(loaded.module, "exports", []) if loaded is not None else []:
            if export.name == function:
                cconv = export.signature.calling_convention or ""
                return cconv[1:].split("_", 1)[0] not in ("", "v")
        return False

    def _say(self, text: str) -> None:
        if self.workbench is not None:
            self.workbench.say(text)

    @staticmethod
    def line(inputs: tuple[str, ...]) -> str:
        return format_inputs_line(inputs)
