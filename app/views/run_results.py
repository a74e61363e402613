"""The last run's results, saved as ``.npy`` from the window (the VM Stepper shows them as text).

A finished run's ``Finished.outputs`` are its result tensors, typed as the function returns them; they are
read once when the run ends (a child session hands them over in shared memory that the first read frees) and
kept until the next run or another module. **Save results as .npy…** writes one file per result: the name
chosen for one result, ``NAME_0.npy``, ``NAME_1.npy``... for several (numpy's ``np.save``, so
``iree-run-module --input=@NAME.npy`` and numpy read them back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QWidget


def result_paths(target: str | Path, count: int) -> list[Path]:
    """Where ``count`` results go when the user names ``target``: itself (as ``.npy``) for one, numbered for more."""
    target = Path(target)
    if target.suffix != ".npy":
        target = target.with_name(target.name + ".npy")
    if count == 1:
        return [target]
    return [target.with_name(f"{target.stem}_{i}.npy") for i in range(count)]


class RunResults(QWidget):
    """A "Save results as .npy…" button and what it would save; a view of the window's last finished run."""

    def __init__(self, bridge: Any, workbench: Any, parent: QWidget | None = None):
        super().__init__(parent)
        self.bridge, self.workbench = bridge, workbench
        self.function: str | None = None
        self.results: list[np.ndarray] = []
        self._run = workbench.state.run
        self.label = QLabel("", self)
        self.save_button = QPushButton("Save results as .npy…", self)
        self.save_button.setObjectName("saveResultsButton")
        self.save_button.setToolTip("Write each result of the last finished run as a .npy file (numpy.save)")
        self.save_button.clicked.connect(self._ask_and_save)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.save_button)
        bridge.finished.connect(self._on_finished)
        workbench.moduleReset.connect(lambda _m: self.clear())
        workbench.stateChanged.connect(self._on_state)
        self.clear()

    def clear(self) -> None:
        self.function, self.results = None, []
        self.label.setText("")
        self.save_button.setEnabled(False)
        self.setVisible(False)

    def _on_state(self, state: Any) -> None:
        if state.run != self._run:  # a new run: the last one's results are not what it returns
            self._run = state.run
            self.clear()

    def _on_finished(self, event: Any) -> None:
        self.function = event.function
        self.results = [ref.to_numpy() for ref in event.outputs]
        if not self.results:
            self.clear()
            return
        shapes = ", ".join("x".join(map(str, a.shape)) + f" {a.dtype}" for a in self.results)
        self.label.setText(f"{len(self.results)} result{'s' if len(self.results) != 1 else ''}: {shapes}")
        self.save_button.setEnabled(True)
        self.setVisible(True)

    def save(self, target: str | Path) -> list[Path]:
        """Write the results to ``target`` (see ``result_paths``); the paths written."""
        paths = result_paths(target, len(self.results))
        for path, array in zip(paths, self.results):
            np.save(path, array)
        return paths

    def suggested_path(self) -> Path:
        """Where the save dialog starts: beside the program opened (the .mlir, else the .vmfb), named after the
        function; the dialog opened in the application's working folder, wherever the model was."""
        name = f"{self.function or 'result'}_result.npy"
        loaded = self.workbench.module
        if loaded is None:
            return Path(name)
        return Path(loaded.source or loaded.path).resolve().parent / name

    def _ask_and_save(self) -> None:
        if not self.results:
            return
        target, _ = QFileDialog.getSaveFileName(
            self, "Save results as .npy", str(self.suggested_path()), "NumPy arrays (*.npy)"
        )
        if target:
            self.save_and_say(target)

    def save_and_say(self, target: str | Path) -> list[Path]:
        """``save``, then say in the window where each result went (or why none was saved)."""
        try:
            paths = self.save(target)
        except OSError as e:
            self.workbench.say(f"Results not saved: {e}")
            return []
        self.workbench.say(f"Saved {len(paths)} result{'s' if len(paths) != 1 else ''}: {', '.join(map(str, paths))}")
        return paths
