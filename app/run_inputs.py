"""Inputs of the function to run, filled in for the user: made from the function's signature (zeros, ones
or random values of the right shapes and types), loaded from ``.npy``/``.npz``, and remembered per file
(its path and content hash, not the module's name: every PyTorch export is ``@module``) and function.
Remembered inputs come back only where they fit the function's signature.

Works on the workbench's state (``app/workbench.py``: the chosen function and its inputs, which the
stepper's run bar only shows and edits): it writes the inputs only while they are empty or still what it
wrote itself, so a user's typing or a restored session is never overwritten. Before a run it fills empty
inputs from the signature (``before_run``), so a first run needs no typing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QSettings

from app.input_defaults import Argument, default_inputs, function_arguments, numpy_inputs
from app.views.stepper_inputs import format_inputs_line, parse_inputs_line
from engine.runtime.function_io import split_shape_and_type
from engine.runtime.hal.constants import format_shape_and_type
from engine.runtime.vmfb.module import caller_calling_convention

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
        try:
            return split_shape_and_type(value.split("=", 1)[0])  # as IREE reads it: ``xi32=3`` is rank 0
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
            return f"input {i} is {_dims(shape)}, {function} takes {format_shape_and_type(arg.shape, arg.element_type)}"
        if element is not None and arg.is_tensor and element != arg.element_type:
            return f"input {i} is {element}, {function} takes {arg.element_type}"
    return None


class RunInputs(QObject):
    """Fills the workbench's inputs (``state.inputs``, the one copy the stepper's line shows) for the chosen
    function, and remembers them per file and function when a run starts."""

    def __init__(self, workbench, context, store: QSettings, folder: Path | None = None, parent=None):
        super().__init__(parent)
        self.workbench = workbench
        self.context = context
        self.store = store
        self.folder = folder  # where large random tensors are written (a temporary folder by default)
        self._written: tuple[str, ...] | None = None  # the inputs as this object last wrote them
        self._function: str | None = None  # the chosen function last seen
        self.fill = "zeros"
        workbench.stateChanged.connect(self._on_state)
        workbench.moduleReset.connect(self._on_module_reset)
        workbench.before_run.append(self.before_run)

    def _on_module_reset(self, _loaded) -> None:
        """A new module: nothing of the previous one's inputs, not even the fill chosen for them."""
        self._written = None
        self._function = None
        self.fill = "zeros"

    def _on_state(self, _state=None) -> None:
        """A newly chosen function (a module opened, the user's choice): offer its inputs."""
        function = self.workbench.state.function
        if function != self._function:
            self._function = function
            self._on_function(function)  # a write now is told to every view after this change (Workbench._emit)

    # -- where things are remembered -------------------------------------------------------------

    def _file_key(self) -> str | None:
        identity = self.workbench.identity()
        if not identity:
            return None
        # QSettings keys: no slashes inside a part.
        return identity.replace("/", "|").replace("\\", "|")

    def _key(self, function: str) -> str | None:
        key = self._file_key()
        return f"{_GROUP}/{key}/{function}" if key and function else None

    def arguments(self, function: str) -> list[Argument] | None:
        loaded = self.workbench.module
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
        state = self.workbench.state
        key = self._key(state.function or "")
        if key:
            self.store.setValue(key, format_inputs_line(state.inputs))
            self.store.sync()

    # -- filling ---------------------------------------------------------------------------------

    def _is_ours(self) -> bool:
        inputs = self.workbench.state.inputs
        return not inputs or inputs == self._written

    def _write(self, inputs: tuple[str, ...]) -> None:
        self._written = tuple(inputs)
        self.workbench.set_inputs(inputs)

    def _on_function(self, function: str | None) -> None:
        if function and function == self.workbench.state.function and self._is_ours():
            self.prefill(function)

    def prefill(self, function: str | None = None, fill: str | None = None) -> tuple[str, ...] | None:
        """Write the remembered inputs of ``function`` (the chosen one by default) or, with none or with
        ``fill`` given, inputs made from its signature; returns them (``None``: signature unknown, and
        the reason is said)."""
        function = function or self.workbench.state.function
        loaded = self.workbench.module
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
        function = self.workbench.state.function
        why = misfit(self.arguments(function), inputs, function) if function else None
        self._write(inputs)
        if why:
            self._say(f"{Path(path).name} does not fit {function}: {why}")
        return inputs

    def ensure(self) -> None:
        """Before a run: fill empty inputs so the function runs without typing."""
        if not self.workbench.state.inputs:
            self.prefill()

    def before_run(self) -> str | None:
        """The stepper's check before a run: fill an empty line from the signature, remember the line; the
        reason when a function that takes inputs has none."""
        function = self.workbench.state.function or ""
        if not self.workbench.state.inputs:
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
        return None

    def _takes_inputs(self, function: str) -> bool:
        loaded = self.workbench.module
        if loaded is None or not hasattr(loaded.module, "exports"):
            return False
        cconv = caller_calling_convention(loaded.module, function)  # "": no such export
        return cconv[1:].split("_", 1)[0] not in ("", "v")

    def _say(self, text: str) -> None:
        self.workbench.say(text)

    @staticmethod
    def line(inputs: tuple[str, ...]) -> str:
        return format_inputs_line(inputs)
