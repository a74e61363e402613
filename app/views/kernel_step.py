"""Step Into Workgroup…: from a paused dispatch to one of its workgroups, statement by statement.

The picker proposes the workgroup that wrote the element selected in the inspector (found by the engine:
``engine.kernel.writer``); once one is chosen the engine records it (``engine.kernel.stepper``) on the
window's engine worker and the recorded workgroup opens as a ``KernelView`` document, at the store that wrote
the selected element when there is one. The program runs again for this, from the workbench's module,
function and inputs, to the paused dispatch's ordinal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.runtime.hal.formats import CPU_FORMATS


@dataclass(frozen=True)
class SelectedElement:
    """An element of the paused dispatch's tensors: ``size`` bytes at ``offset`` of binding ``binding``."""

    binding: int
    offset: int
    size: int
    label: str  # what the user clicked, e.g. "output 0 [1, 5]"


@dataclass(frozen=True)
class KernelRequest:
    """What recording a workgroup needs: the module run again to the paused dispatch."""

    module_path: str
    function: str
    inputs: tuple[str, ...]
    dispatch: int
    workgroup_count: tuple[int, int, int]
    element: SelectedElement | None = None
    parameters: tuple[str, ...] = ()  # the session's parameter archives ([SCOPE=]FILE)


def capture_and_find_writer(request: KernelRequest) -> tuple[Any, tuple[int, int, int] | None]:
    """(On the engine worker) the paused dispatch captured again, and the workgroup that wrote the selected
    element (None when there is none or nothing is selected)."""
    from engine.kernel.dispatch_run import executable_data, run_to_dispatch
    from engine.kernel.writer import workgroup_that_wrote

    captured = run_to_dispatch(request.module_path, request.function, request.inputs, request.dispatch,
                               request.parameters)  # fmt: skip
    e = request.element
    if e is None:
        return captured, None
    data = executable_data(request.module_path, captured)
    return captured, workgroup_that_wrote(captured, data, e.binding, e.offset, e.size)


STEPPABLE_FORMATS = CPU_FORMATS  # llvm-cpu libraries (embedded or system ELF) and VMVX


def steppable(module: Any) -> bool:
    """Whether the module (a ``VmfbModule``) has executables a workgroup can be stepped in (llvm-cpu, VMVX)."""
    return any(e.format in STEPPABLE_FORMATS for e in module.executables)


def program_of(module_path: str, source: Any = None):
    """The program a module was compiled from: the one the window compiled, else the one its debug
    locations name when it is still there (None otherwise)."""
    if source is not None:
        return source
    from engine.dispatch.rebuild_sources import program_named_by

    return program_named_by(module_path)


def build_for_cpu(program) -> str:
    """(On the engine worker) ``program`` compiled for llvm-cpu (its executables' sources kept beside), as the
    window compiles an .mlir it opens (a build made before is read back); the new module's path, or
    ``LensError`` with the compiler's words."""
    from pathlib import Path

    from app.module_loader import compile_source

    return str(compile_source(Path(program), target="llvm-cpu").vmfb_path)


def record(request: KernelRequest, captured: Any, workgroup: tuple[int, int, int]):
    """(On the engine worker) the recorded workgroup."""
    from engine.kernel.stepper import record_captured

    return record_captured(request.module_path, captured, workgroup)


class WorkgroupPicker(QDialog):
    """Which workgroup to step: X, Y, Z within the dispatch's count; proposes the selected element's writer."""

    chosen = Signal(object)  # (x, y, z)

    def __init__(self, request: KernelRequest, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Step Into Workgroup")
        self.setObjectName("workgroupPicker")
        self.request = request
        self.spins: list[QSpinBox] = []
        row = QHBoxLayout()
        for axis, count in zip("XYZ", request.workgroup_count):
            spin = QSpinBox(self)
            spin.setObjectName(f"workgroup{axis}")
            spin.setRange(0, max(count - 1, 0))
            row.addWidget(QLabel(f"{axis} (of {count})", self))
            row.addWidget(spin)
            self.spins.append(spin)
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        if request.element is not None:
            self.note.setText(f"Finding the workgroup that wrote {request.element.label}…")
        else:
            self.note.setText(
                "No element is selected (click one in the Heatmap or the Table to have the workgroup that wrote "
                "it proposed): pick a workgroup."
            )
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, Qt.Orientation.Horizontal, self
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Step Into")
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        # Keys go back to the window when the picker closes (its debugger shortcuts work there).
        self.finished.connect(lambda _result: parent is not None and parent.window().activateWindow())
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Dispatch #{request.dispatch}: workgroups "
                                f"{' x '.join(map(str, request.workgroup_count))}", self))  # fmt: skip
        layout.addLayout(row)
        layout.addWidget(self.note)
        layout.addWidget(self.buttons)

    def refuse_format(self, formats: str, program) -> QPushButton | None:
        """Say that this build cannot be stepped; offer to build the program for llvm-cpu when it is known
        (the returned button; None when the program is not)."""
        for spin in self.spins:
            spin.setEnabled(False)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(False)
        where = f" Build {program.name} for llvm-cpu, open it and stop at this dispatch again." if program else (
            " Compile the program with --iree-hal-local-target-device-backends=llvm-cpu (or vmvx) and open that.")
        self.note.setText(f"This module's executables are {formats}: stepping inside a dispatch needs the "
                          f"llvm-cpu or VMVX build of the same program.{where}")  # fmt: skip
        if program is None:
            return None
        button = QPushButton("Build for llvm-cpu", self)
        button.setObjectName("buildForCpu")
        self.layout().insertWidget(self.layout().count() - 1, button)
        return button

    def workgroup(self) -> tuple[int, int, int]:
        x, y, z = (s.value() for s in self.spins)
        return x, y, z

    def set_writer(self, workgroup: tuple[int, int, int] | None) -> None:
        element = self.request.element
        if element is None:
            return
        if workgroup is None:
            self.note.setText(f"No workgroup writes {element.label}: pick one.")
            return
        for spin, value in zip(self.spins, workgroup):
            spin.setValue(value)
        self.note.setText(f"Workgroup ({', '.join(map(str, workgroup))}) wrote {element.label}.")

    def _accept(self) -> None:
        self.chosen.emit(self.workgroup())
        self.accept()
