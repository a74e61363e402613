"""A program that calls other compiled modules, in the window: opened with them beside it, the Log says which
it linked; a breakpoint on a function of one stops there and the stepper shows that module's own disassembly
(with the program's named as it is), and says that instruction breakpoints belong to the program's functions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from support.app import TIMEOUT, add_breakpoint, open_in_stepper
from support.session import PROGRAMS, compile_program

from engine.runtime.vmfb.disassembler import function_lines
from engine.runtime.vmfb.module import open_vmfb


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("linked_window")
    for name in ("module_a", "module_b", "pipeline"):
        compile_program(str(PROGRAMS / "linked" / f"{name}.mlir"), "llvm-cpu", out)
    return out


def test_a_stop_in_a_called_module_shows_its_code(qtbot, main_window, folder):
    pipeline = folder / "pipeline.llvm-cpu.vmfb"
    panel = open_in_stepper(qtbot, main_window, pipeline)
    said = [m.text for m in main_window.messages.messages]
    assert any(f"linked with @module_a from {folder / 'module_a.llvm-cpu.vmfb'}" in t for t in said), said
    assert panel.function_combo.currentText() == "run"
    panel.set_inputs(("8xf32=-1 2 -3 4 -5 6 -7 8",))
    add_breakpoint(qtbot, panel, "function", "module_b.mul")
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as stopped:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    frames = stopped.args[0].location.frames
    assert (frames[-1].module, frames[-1].function) == ("module_b", "mul")
    # The listing is module_b's mul, instruction for instruction.
    mul = open_vmfb(folder / "module_b.llvm-cpu.vmfb")
    expected = [line.text.strip() for line in function_lines(mul, "mul")]
    shown = panel.listing.toPlainText()
    assert all(text in shown for text in expected[:8]), shown[:500]
    assert panel.function_title.text().startswith("@module_b.mul") and "a module @module calls" in panel.function_title.text()
    assert "module_b.mul pc 0x0" in panel.status_label.text()
    # F9 there is refused with the reason, and sets nothing.
    before = tuple(panel.bridge.breakpoints)
    qtbot.keyClick(panel.listing, Qt.Key.Key_F9)
    assert tuple(panel.bridge.breakpoints) == before
    assert "module it calls" in panel.status_label.text()
    # The outer frame is the program's own run, with its own listing again.
    panel.call_stack.select_frame(0)
    assert panel.shown_function == "run" and panel.shown_module is None
    assert panel.function_title.text().startswith("@module.run")


def test_a_module_it_calls_and_that_is_not_beside_it_is_named(qtbot, main_window, folder, tmp_path):
    lone = tmp_path / "pipeline.vmfb"
    lone.write_bytes((folder / "pipeline.llvm-cpu.vmfb").read_bytes())
    panel = main_window.panels["stepper"]
    main_window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT) as failed:
        main_window.open_file(lone)
    message = failed.args[0].message
    assert "calls functions of module 'module_" in message and "put its .vmfb beside the program" in message
    qtbot.waitUntil(lambda: "module_" in panel.status_label.text(), timeout=TIMEOUT)
