"""The window as one workbench (issue 24): one current state for module, device, function, inputs and run.

In the real ``MainWindow`` with real programs (the ONNX imports in the shared models folder, compiled with
iree-compile): opening a second module leaves nothing of the first; the inputs offered fit the function's
signature (read from its ``hal.buffer_view.assert`` checks); Inputs > Fill and Run without inputs give a
run; Run says why when it cannot; a NaN stop names the first NaN's index; the function offered first is
the one a user calls.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import iree_tool
from support.session import compile_program

from app.run_inputs import input_shape, misfit
from app.views.stepper_panel import callable_first

MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"
TIMEOUT = 120_000
needs_models = pytest.mark.skipif(
    not (MODELS / "small_cnn.mlir").exists(), reason=f"the shared models are not at {MODELS}"
)


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """small_cnn (a CNN) and attention_block (a transformer block), ONNX imports compiled for llvm-cpu."""
    out = tmp_path_factory.mktemp("workbench_models")
    built = {}
    for name in ("small_cnn", "attention_block"):
        if not (MODELS / f"{name}.mlir").exists():
            continue
        built[name] = compile_program(str((MODELS / f"{name}.mlir").resolve()), "llvm-cpu", out)
    return built


def open_module(qtbot, window, vmfb: Path):
    panel = window.panels["stepper"]
    window.docks["stepper"].show()
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    return panel


def run_and_wait(qtbot, window, signal="finished"):
    bridge = window.session_bridge
    with qtbot.waitSignal(getattr(bridge, signal), timeout=TIMEOUT) as done:
        assert window.run_function(), window.statusBar().currentMessage()
    return done.args[0]


def reference_output(vmfb: Path, function: str, inputs: list[str]) -> str:
    proc = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={vmfb}", f"--function={function}", *[f"--input={i}" for i in inputs]],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def test_the_function_a_user_calls_comes_first():
    assert callable_first(["main$async", "main", "__init"]) == ["main", "main$async", "__init"]
    assert callable_first(["b$async", "a", "b"]) == ["a", "b", "b$async"]


def test_run_with_no_module_says_why(qtbot, main_window):
    assert not main_window.run_function()
    assert "open" in main_window.statusBar().currentMessage().lower()
    main_window.run_action.trigger()  # Ctrl+R: the same, never silence
    assert "open" in main_window.statusBar().currentMessage().lower()



def test_a_debugger_key_with_nothing_to_step_says_why(qtbot, main_window):
    """F6 (Next Dispatch), F10, F5 ... with no paused run: their actions are disabled, and the key says why
    in the status bar instead of doing nothing."""
    from PySide6.QtTest import QTest

    main_window.activateWindow()
    for key in (Qt.Key.Key_F6, Qt.Key.Key_F10, Qt.Key.Key_F5):
        main_window.statusBar().clearMessage()
        QTest.keyClick(main_window, key)
        qtbot.waitUntil(lambda: "no module is open" in main_window.statusBar().currentMessage(), timeout=5000)
    assert main_window.statusBar().currentMessage().startswith("Continue:")


@needs_models
def test_opening_a_second_module_leaves_nothing_of_the_first(qtbot, main_window, models, tmp_path):
    window = main_window
    cnn, transformer = models["small_cnn"], models["attention_block"]
    panel = open_module(qtbot, window, cnn)
    # The function a user calls, with inputs made from the shapes its host code asserts (1x3x16x16xf32).
    assert panel.function_combo.currentText() == "small_cnn"
    qtbot.waitUntil(lambda: panel.inputs == ("1x3x16x16xf32=0",), timeout=10_000)
    # A run that fails leaves an error banner; the next good run clears it.
    panel.set_inputs(("1x2xf32=0",))
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT):
        window.run_function()
    assert window.banner.isVisible()
    x = MODELS / "small_cnn_x.npy"
    window.load_numpy_inputs(x)
    finished = run_and_wait(qtbot, window)
    assert not window.banner.isVisible()
    run_list = window.panels["run_dispatch_list"]
    qtbot.waitUntil(lambda: run_list.model.rowCount() > 0, timeout=10_000)  # the finished run's dispatches
    expected = reference_output(cnn, "small_cnn", [f"@{x}"])
    assert expected.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in finished.results_text
    # Stop at entry so the registers and call stack hold something of this module.
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        assert window.workbench.run(stop_at_entry=True)
    assert panel.call_stack.topLevelItemCount() and panel.registers.registers.i32
    assert panel.output.toPlainText()

    assert window.workbench.state.stop_text and window.workbench.state.function == "small_cnn"

    # The transformer: nothing of the CNN remains.
    panel = open_module(qtbot, window, transformer)
    assert window.workbench.module.path == transformer
    state = window.workbench.state
    assert state.paused is None and state.stop_text == "" and "small_cnn" not in state.functions
    assert state.function == "attention_block" == panel.function_combo.currentText()
    assert panel.output.toPlainText() == ""
    assert panel.call_stack.topLevelItemCount() == 0
    assert not panel.registers.registers.i32
    assert not window.banner.isVisible()
    assert window.documents.document("paused-dispatch") is None
    assert run_list.model.rowCount() == 0
    assert panel.function_combo.currentText() == "attention_block"
    assert "small_cnn" not in [panel.function_combo.itemText(i) for i in range(panel.function_combo.count())]
    # The inputs offered fit the transformer's signature (not the CNN's .npy), in the one state and its view.
    qtbot.waitUntil(lambda: panel.inputs == ("1x8x32xf32=0",), timeout=10_000)
    assert window.workbench.state.inputs == ("1x8x32xf32=0",)
    assert panel.inputs_edit.text() == "--input=1x8x32xf32=0"
    args = window.run_inputs.arguments("attention_block")
    assert misfit(args, panel.inputs, "attention_block") is None
    assert misfit(args, (f"@{x}",), "attention_block") is not None
    assert window.run_inputs.remembered("attention_block") is None
    # The saved session no longer mixes the CNN's call with the transformer.
    saved = window.session_bridge.store.load()
    assert saved.module_path == str(transformer) and saved.function in (None, "attention_block")
    # Back to the CNN file: its own inputs (per file and function) come back.
    panel = open_module(qtbot, window, cnn)
    qtbot.waitUntil(lambda: panel.inputs == (f"@{x}",), timeout=10_000)


def test_the_run_bar_is_a_view_of_the_workbench(qtbot, main_window, compiled):
    """The function box and the inputs line keep no copy of their own: they show the workbench's function
    and inputs and edit them; Run and Profile read the same state."""
    from app.views.stepper_inputs import format_inputs_line

    window = main_window
    workbench = window.workbench
    panel = open_module(qtbot, window, compiled.path("mlp", "llvm-cpu"))
    qtbot.waitUntil(lambda: workbench.state.inputs == ("2x16xf32=0",), timeout=10_000)
    assert panel.function_combo.currentText() == workbench.state.function == "main"
    items = tuple(panel.function_combo.itemText(i) for i in range(panel.function_combo.count()))
    assert items == workbench.state.functions and workbench.state.functions[0] == "main"
    assert panel.inputs_edit.text() == format_inputs_line(workbench.state.inputs)
    # The state changed (by the Inputs menu, a restore, any view): the widgets show it.
    workbench.set_inputs(("2x16xf32=0.5",))
    assert panel.inputs_edit.text() == "--input=2x16xf32=0.5"
    workbench.set_function("__init")
    assert panel.function_combo.currentText() == "__init"
    # The user edits the widgets: the state follows, and what is typed is never rewritten under the cursor.
    panel.function_combo.setCurrentText("main")
    assert workbench.state.function == "main"
    panel.inputs_edit.clear()
    assert workbench.state.inputs == ()
    qtbot.keyClicks(panel.inputs_edit, '--input="2x16xf32=2')  # a quote not closed yet
    assert panel.inputs_edit.text() == '--input="2x16xf32=2'
    assert workbench.state.inputs == ("2x16xf32=2",)
    qtbot.keyClicks(panel.inputs_edit, '"')
    # Run calls exactly the state's function with the state's inputs.
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT) as done:
        qtbot.keyClick(panel.inputs_edit, Qt.Key.Key_Return)
    assert done.args[0].function == "main"
    assert window.session_bridge.last_call.inputs == ("2x16xf32=2",) == workbench.state.inputs
    expected = reference_output(compiled.path("mlp", "llvm-cpu"), "main", ["2x16xf32=2"])
    assert expected.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in done.args[0].results_text
    assert panel.output.toPlainText().splitlines()[0] == "$ main --input=2x16xf32=2"


def test_opening_another_program_closes_the_previous_ones_phases(qtbot, main_window):
    """The phases document of the previous program goes with it; the Compile panel keeps its compilation
    (for diffs), and a program compiled in the panel keeps its phases when it is debugged."""
    from engine.samples import sample_path

    window = main_window

    def phases() -> list[str]:
        return [t for t in window.documents.titles() if t.startswith("Phases")]

    open_module(qtbot, window, sample_path("mlp"))
    assert phases() == ["Phases — mlp.mlir"]
    next(a for a in window.inputs_menu.actions() if a.text() == "Fill with ones").trigger()
    assert window.workbench.state.inputs == ("2x16xf32=1",)
    open_module(qtbot, window, sample_path("softmax"))
    # The next module's inputs are made afresh (zeros), not with the fill chosen for the previous one.
    assert window.workbench.state.inputs and all(i.endswith("=0") for i in window.workbench.state.inputs)
    assert phases() == ["Phases — softmax.mlir"]
    compile_panel = window.panels["compile"]
    assert len(compile_panel.compilations) >= 2
    compile_panel.set_source(sample_path("mlp"))
    with qtbot.waitSignal(compile_panel.compilationFinished, timeout=TIMEOUT):
        compile_panel.compile()
    # Named as the panel lists the compile (its options), beside the program's.
    qtbot.waitUntil(lambda: "Phases — mlp.mlir (llvm-cpu)" in phases(), timeout=10_000)
    with qtbot.waitSignal(window.session_bridge.opened, timeout=TIMEOUT):
        compile_panel.debug_button.click()
    assert phases() == ["Phases — mlp.mlir (llvm-cpu)"]


@needs_models
def test_fill_and_run_without_inputs_give_a_run(qtbot, main_window, models):
    window = main_window
    transformer = models["attention_block"]
    panel = open_module(qtbot, window, transformer)
    # Inputs > Fill with random: inputs of the right shape appear.
    fill = next(a for a in window.inputs_menu.actions() if a.text() == "Fill with random")
    panel.inputs_edit.clear()
    fill.trigger()
    assert len(panel.inputs) == 1 and input_shape(panel.inputs[0]) == ((1, 8, 32), "f32")
    assert len(panel.inputs[0].split("=", 1)[1].split()) == 256
    assert "filled" in window.statusBar().currentMessage()
    finished = run_and_wait(qtbot, window)
    assert "1x8x32xf32" in finished.results_text
    assert window.statusBar().currentMessage().startswith("Finished attention_block")
    # Run with an empty inputs line: inputs filled in (the file's remembered ones, else from the signature).
    panel.inputs_edit.clear()
    finished = run_and_wait(qtbot, window)
    assert panel.inputs and input_shape(panel.inputs[0])[0] == (1, 8, 32)
    expected = reference_output(transformer, "attention_block", list(panel.inputs))
    assert expected.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in finished.results_text


def test_a_nan_stop_names_the_first_nan(qtbot, main_window, tmp_path):
    window = main_window
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    panel = open_module(qtbot, window, vmfb)
    view = panel.breakpoints_view
    view.kind.setCurrentIndex(view.kind.findData("nan"))
    with qtbot.waitSignal(panel.bridge.breakpointsChanged, timeout=TIMEOUT):
        view.add_button.click()
    # log(a - b): NaN where a < b. Only elements 13 and 20 are negative differences.
    a = np.full((4, 8), 3.0, dtype=np.float32)
    b = np.ones((4, 8), dtype=np.float32)
    b.flat[13] = b.flat[20] = 5.0
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    with np.errstate(invalid="ignore"):
        expected_first = int(np.argmax(~np.isfinite(np.log(a - b))))
    panel.set_inputs((f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"))
    stop = run_and_wait(qtbot, window, "stopped")
    nonfinite = stop.detail.nonfinite
    assert nonfinite and nonfinite[0].first == expected_first == 13 and nonfinite[0].nan == 2
    assert f"first at index {expected_first}" in panel.status_label.text()
    assert f"first at index {expected_first}" in window.statusBar().currentMessage()
    assert "2 NaN" in window.workbench.state.stop_text


def _vulkan_missing() -> str | None:
    from engine.runtime.hal.vulkan.loader import vulkan_available

    return vulkan_available()


@pytest.mark.vulkan
def test_a_vulkan_module_opened_with_local_sync_selected_opens_on_vulkan_and_runs(qtbot, main_window, tmp_path):
    """A module opens on a device that runs it (issue 35: a module built for one device never sits on another
    "Opening…"); the window says which device it chose and why."""
    reason = _vulkan_missing()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    window = main_window
    devices = window.panels["device"]
    qtbot.waitUntil(lambda: devices.listed, timeout=TIMEOUT)
    assert window.workbench.device == "local-sync"
    vmfb = compile_program("nan_log", "vulkan-spirv", tmp_path)
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    assert window.workbench.device == "vulkan://0" and window.workbench.state.mismatch is None
    assert not window.mismatch_bar.isVisible()
    assert "opened on vulkan://0" in window.statusBar().currentMessage()
    assert devices.device_uri == "vulkan://0" and panel.device_label.text() == "on vulkan://0"
    assert "vulkan://0" in window.module_label.text()
    panel.set_inputs(("4x8xf32=3", "4x8xf32=1"))
    finished = run_and_wait(qtbot, window)
    proc = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={vmfb}", "--device=vulkan", "--function=main",
         "--input=4x8xf32=3", "--input=4x8xf32=1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in finished.results_text


def test_a_compile_panel_result_is_debugged_in_one_action(qtbot, main_window):
    from engine.samples import sample_path

    window = main_window
    compile_panel = window.panels["compile"]
    compile_panel.set_source(sample_path("mlp"))
    with qtbot.waitSignal(compile_panel.compilationFinished, timeout=TIMEOUT) as done:
        compile_panel.compile()
    assert done.args[0].ok and compile_panel.debug_button.isEnabled()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        compile_panel.debug_button.click()
    assert window.workbench.module.path == done.args[0].vmfb_path
    assert panel.function_combo.currentText() == "main"
    finished = run_and_wait(qtbot, window)  # inputs made from the signature
    assert finished.function == "main" and "2x4xf32" in finished.results_text


def test_run_runs_after_time_travel_a_substitution_a_failed_apply_and_a_revert(qtbot, main_window, tmp_path):
    from support import compile_with_dumps, edited_source

    from engine.session.protocol import Breakpoint

    window = main_window
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    panel = open_module(qtbot, window, vmfb)
    bridge = window.session_bridge
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.add_breakpoint(Breakpoint("dispatch", ordinal=0, when="after"))
    panel.set_inputs(("4x8xf32=1.5", "4x8xf32=2"))
    run_and_wait(qtbot, window, "stopped")
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
        panel.continue_action.trigger()
    # Time travel: back into dispatch #0 (parked in it).
    with qtbot.waitSignal(bridge.stopped, timeout=TIMEOUT):  # at once: the history catches up by itself
        panel.reverse.previous_dispatch_action.trigger()
    editor_panel = window.show_panel("editor")
    qtbot.waitUntil(lambda: editor_panel.editor is not None, timeout=TIMEOUT)
    editor = editor_panel.editor
    editor.select("main_dispatch_0", "mlir")
    editor.text.setPlainText(edit.read_text())
    editor.last_outputs = None
    with qtbot.waitSignal(editor.applied, timeout=TIMEOUT):
        editor.apply_button.click()  # a substitution (and the paused dispatch rerun)
    qtbot.waitUntil(lambda: editor.last_outputs is not None, timeout=TIMEOUT)
    editor.text.setPlainText(edit.read_text().replace("arith.mulf", "arith.mulq", 1))
    with qtbot.waitSignal(editor.failed, timeout=TIMEOUT):
        editor.apply_button.click()  # a failed apply
    qtbot.waitUntil(lambda: not editor.busy(), timeout=TIMEOUT)
    editor.last_outputs = None
    editor.revert_button.click()  # and a revert
    qtbot.waitUntil(lambda: not editor.busy(), timeout=TIMEOUT)
    with qtbot.waitSignal(bridge.breakpointsChanged, timeout=TIMEOUT):
        bridge.set_breakpoints(())
    # Run (Ctrl+R) runs: to the end, with the module's own code.
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT) as done:
        window.run_action.trigger()
    expected = reference_output(vmfb, "main", ["4x8xf32=1.5", "4x8xf32=2"])
    assert expected.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0] in done.args[0].results_text


NAN_LOG_LOG1P = (Path(__file__).resolve().parents[1] / "session_programs" / "nan_log.mlir").read_text().replace(
    "math.log %d", "math.log1p %d"
)


def test_break_on_divergence_from_a_module_and_profile_this_run(qtbot, main_window, tmp_path):
    window = main_window
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    variant = tmp_path / "nan_log_log1p.mlir"
    variant.write_text(NAN_LOG_LOG1P)
    reference = compile_program(str(variant), "llvm-cpu", tmp_path)
    panel = open_module(qtbot, window, vmfb)
    view = panel.breakpoints_view
    view.kind.setCurrentIndex(view.kind.findData("diverge"))
    assert not view.browse_button.isHidden()  # the reference picker shows for this kind
    view.name.setText(str(reference))
    with qtbot.waitSignal(panel.bridge.breakpointsChanged, timeout=TIMEOUT):
        view.add_button.click()
    [bp] = panel.bridge.breakpoints
    assert bp.kind == "diverge" and bp.reference == str(reference)
    panel.set_inputs(("4x8xf32=3", "4x8xf32=1"))
    stop = run_and_wait(qtbot, window, "stopped")
    # Dispatch 0 (a - b) is the same in both; dispatch 1 is log vs log1p: the first to diverge.
    assert stop.location.dispatch_info.ordinal == 1 and stop.detail.divergence is not None
    assert "diverged" in panel.status_label.text()
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        panel.continue_action.trigger()

    # Profile this run: the same function and inputs, timed by IREE, in the Zones view.
    zones = window.panels["zones"]
    with qtbot.waitSignal(zones.traceLoaded, timeout=TIMEOUT) as done:
        assert window.profile_action.isEnabled()
        window.profile_action.trigger()
    trace = done.args[0]
    assert trace.metadata["function"] == "main" and str(trace.source) == str(vmfb)
    assert window.documents.currentWidget() is zones
    assert zones.table.columnWidth(0) >= 120  # the zone names stay readable (not "m...2"), 40 % of a narrow table
    names = {s.name for s in zones.stats}
    assert any("main_dispatch_1" in n for n in names), names
    # A new module: its profile (of the old module) goes.
    open_module(qtbot, window, reference)
    assert window.documents.document("panel:zones") is None


def test_keyboard_shortcuts_list_every_binding(qtbot, main_window):
    from PySide6.QtGui import QAction, QKeySequence

    view = main_window.show_shortcuts()
    keys = {row[1] for row in view.rows}
    bound = {
        ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in a.shortcuts())
        for a in main_window.findChildren(QAction)
        if a.shortcuts()
    }
    assert bound <= keys
    for expected in ("F5", "F6", "Shift+F6", "F9", "F10", "F11", "Ctrl+R", "Ctrl+O"):
        assert expected in keys, expected


def test_nan_and_inf_are_visible_in_the_tensor_inspector(qtbot):
    from app.views.tensor_inspector import NAN_RGBA, POSINF_RGBA, InspectedTensor, TensorInspector

    inspector = TensorInspector()
    qtbot.addWidget(inspector)
    values = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    values[1, 2, 1] = np.nan
    values[1, 2, 3] = np.inf
    inspector.set_tensors([InspectedTensor("output 0", values, "2x3x4xf32")])
    expected = tuple(int(i) for i in np.argwhere(~np.isfinite(values))[0])
    assert expected == (1, 2, 1)
    assert "first non-finite at [1, 2, 1]" in inspector.summary.text() and "NaN 1" in inspector.summary.text()
    assert inspector.go_to_first_nonfinite() == expected
    assert inspector.tabs.currentWidget() is inspector.table
    cell = inspector.table.currentIndex()
    assert (cell.row(), cell.column()) == (2, 1) and [s.value() for s in inspector.index_spins] == [1]
    assert np.isnan(inspector.table_model.values[2, 1])
    assert cell.data(Qt.ItemDataRole.BackgroundRole) is not None  # a coloured cell, not plain "nan"
    # The heatmap paints NaN and Inf over the colour map in their own colours.
    overlay = inspector.heatmap.nonfinite.image
    assert inspector.heatmap.nonfinite_count == 2
    assert tuple(overlay[2, 1]) == NAN_RGBA and tuple(overlay[2, 3]) == POSINF_RGBA
    assert overlay[0, 0, 3] == 0  # transparent over finite values


def test_the_last_session_never_mixes_modules(qtbot, make_main_window, tmp_path):
    from engine.session.persist import SessionStore

    first_vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    other = compile_program("nan_log", "vmvx", tmp_path)  # another file of the same module name
    window = make_main_window()
    panel = open_module(qtbot, window, first_vmfb)
    panel.set_inputs(("4x8xf32=3", "4x8xf32=1"))
    run_and_wait(qtbot, window)
    window.close()
    # A new start opens another file before restoring: the saved call (of the first file) is dropped.
    window = make_main_window()
    panel = window.panels["stepper"]
    assert "last run: main" in panel.restore_label.text()
    open_module(qtbot, window, other)
    saved = SessionStore(Path(window.session_bridge.store.root)).load()
    assert saved.module_path == str(other) and saved.function is None and saved.inputs == []


def test_a_module_built_for_another_cpu_says_so_in_the_bar(qtbot, main_window, tmp_path):
    # Cross-compiled for arm64: the bar names both machines (IREE's runtime would say only "HAL device not
    # found"), and the module is not opened for a run.
    window = main_window
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path, "--iree-llvmcpu-target-triple=aarch64-unknown-linux-gnu")
    window.open_file(vmfb)
    qtbot.waitUntil(lambda: window.workbench.state.mismatch is not None, timeout=TIMEOUT)
    text = window.workbench.state.mismatch.describe()
    assert "embedded-elf-arm_64" in text and "this one is x86_64" in text, text
    qtbot.waitUntil(lambda: window.mismatch_bar.isVisible(), timeout=TIMEOUT)
