"""What a walk through the window on the shared models found (issue 35's walk-through), each pinned on a real
compiled program in the real window: the paused dispatch's document never reads "(before it runs)" once the
run has moved on; a Vulkan-built module opened before the Vulkan devices are listed opens on Vulkan as soon
as they are.

Programs from ``tests/session_programs`` compiled with the real iree-compile, run in the window's real debug
session (llvm-cpu, and Vulkan on lavapipe); expected values from IREE's own runtime.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support import iree_tool
from support.session import compile_program

from app.panels import PANELS
from engine.session.protocol import Breakpoint, BreakpointKind

TIMEOUT = 120_000
HEALTHY = ("4x8xf32=3", "4x8xf32=1")


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def open_module(qtbot, window, vmfb):
    window.docks["stepper"].show()
    with qtbot.waitSignal(window.session_bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)


def test_the_paused_dispatch_document_says_when_the_run_has_moved_on(qtbot, main_window, tmp_path):
    """Walk, SqueezeNet at 1366x768: after Continue finished the run, the dispatch document still read
    "Dispatch #10 … (before it runs)" over its tensors, as if the run were paused there."""
    window, bridge = main_window, main_window.session_bridge
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=1))
    window.workbench.set_inputs(HEALTHY)
    runs = window.panels["run_dispatches"]
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        assert window.workbench.run()
    document = window.documents.document("paused-dispatch")
    assert document is not None and document.header.text().startswith("Dispatch #1 ")
    assert "before it runs" in document.header.text() and "no longer paused" not in document.header.text()
    bridge.set_breakpoints(())
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
        bridge.continue_()
    assert window.workbench.state.outcome == "finished"
    header = document.header.text()
    assert header.startswith("The run finished: it is no longer paused at dispatch #1."), header
    assert "Dispatch #1 " in header  # what the tensors below are stays said
    # Back to a stop in the recorded run: the document is current again, without the notice.
    with qtbot.waitSignal(runs.tensorsShown, timeout=TIMEOUT):
        assert window.panels["run_dispatch_list"].go_to(2)
    qtbot.waitUntil(lambda: document.header.text().startswith("Dispatch #2 "), timeout=TIMEOUT)
    assert "no longer paused" not in document.header.text()


def _vulkan_missing() -> str | None:
    from engine.runtime.hal.vulkan.loader import vulkan_available

    return vulkan_available()


@pytest.mark.vulkan
def test_a_vulkan_module_opened_before_the_devices_are_listed_opens_on_vulkan_when_they_are(
    qtbot, make_main_window, tmp_path
):
    """Known leftover of issue 35: a Vulkan-built module opened while only the CPU was listed stayed on the
    CPU with the Switch bar offered, even after the Vulkan devices arrived. The listing is made certain to
    come after the open by making the Device panel after it (the same signal the window's own panel sends
    when its worker's listing lands)."""
    reason = _vulkan_missing()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    vmfb = compile_program("nan_log", "vulkan-spirv", tmp_path)
    window = make_main_window(panels=[spec for spec in PANELS if spec.id != "device"])
    with qtbot.waitSignal(window.workbench.stateChanged, timeout=TIMEOUT):
        window.open_file(vmfb)
    qtbot.waitUntil(lambda: window.workbench.module is not None, timeout=TIMEOUT)
    assert window.workbench.device == "local-sync" and window.workbench.state.mismatch is not None
    assert window.mismatch_bar.isVisible()
    device_spec = next(spec for spec in PANELS if spec.id == "device")
    with qtbot.waitSignal(window.session_bridge.opened, timeout=TIMEOUT):
        window.add_panel(device_spec)  # its Vulkan listing arrives now, after the module opened
    assert window.workbench.device == "vulkan://0" and window.workbench.state.mismatch is None
    assert not window.mismatch_bar.isVisible()
    assert "opened on vulkan://0" in window.statusBar().currentMessage()
    window.workbench.set_inputs(HEALTHY)
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT) as done:
        assert window.workbench.run(), window.statusBar().currentMessage()
    proc = subprocess.run(
        [iree_tool("iree-run-module"), f"--module={vmfb}", "--device=vulkan", "--function=main",
         *(f"--input={i}" for i in HEALTHY)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = proc.stdout.split("result[0]: hal.buffer_view", 1)[1].strip().splitlines()[0]
    assert expected in done.args[0].results_text


def _stop_after_dispatch_1(qtbot, window, tmp_path):
    from PySide6.QtCore import Qt

    window.resize(1366, 768)  # and the docks as the walk found them at that size: the stepper ~515 px wide
    window.resizeDocks([window.docks["stepper"]], [515], Qt.Orientation.Horizontal)
    bridge = window.session_bridge
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=1, when="after"))
    window.workbench.set_inputs(HEALTHY)
    with qtbot.waitSignal(window.panels["run_dispatches"].tensorsShown, timeout=TIMEOUT):
        assert window.workbench.run()
    document = window.documents.document("paused-dispatch")
    qtbot.waitUntil(lambda: document.isVisible() and document.inspector.tensor_list.count() > 0, timeout=TIMEOUT)
    return document


def test_the_tensor_list_shows_each_binding_whole_at_1366(qtbot, main_window, tmp_path):
    """Walk, both models at 1366x768 and 1920x1080: the paused dispatch's tensor list was ~90 px wide at
    1366 ("binding 0 @19…"), each item one line of label and type; a user could not tell the bindings apart."""
    document = _stop_after_dispatch_1(qtbot, main_window, tmp_path)
    inspector = document.inspector
    metrics = inspector.tensor_list.fontMetrics()
    lines = [line for i in range(inspector.tensor_list.count()) for line in inspector.tensor_list.item(i).text().split("\n")]
    assert any(line.startswith("binding 0") for line in lines) and any(line.startswith("binding 1") for line in lines)
    qtbot.waitUntil(
        lambda: inspector.tensor_list.viewport().width() >= max(metrics.horizontalAdvance(x) for x in lines),
        timeout=5_000,
    )


def test_a_paused_dispatch_tensor_is_saved_as_npy(qtbot, main_window, tmp_path):
    """Walk: a dispatch's output could be looked at but not saved from the window (the CLI's save-tensors
    could); the inspector's Save as .npy writes the tensor as typed now."""
    from PySide6.QtCore import Qt

    document = _stop_after_dispatch_1(qtbot, main_window, tmp_path)
    inspector = document.inspector
    outputs = [i for i, t in enumerate(document.tensors) if t.binding == 1]
    assert outputs, [t.label for t in document.tensors]
    inspector.tensor_list.setCurrentRow(outputs[-1])
    inspector.type_edit.setText("4x8xf32")  # the user's reading of the bytes (typed or not yet typed alike)
    qtbot.keyClick(inspector.type_edit, Qt.Key.Key_Return)
    assert inspector.save_button.isEnabled()
    with qtbot.waitSignal(main_window.workbench.said, timeout=5_000) as said:
        assert inspector.save_current(tmp_path / "log_out") == tmp_path / "log_out.npy"
    saved = np.load(tmp_path / "log_out.npy")
    expected = np.log(np.full((4, 8), 3, np.float32) - np.full((4, 8), 1, np.float32))
    assert saved.shape == (4, 8) and saved.dtype == np.float32 and np.array_equal(saved, expected)
    assert "Saved binding 1" in said.args[0] and "of dispatch #1" in said.args[0]


def test_a_long_breakpoint_is_read_whole_in_a_1366_window(qtbot, main_window, tmp_path):
    """Walk, EfficientViT at 1366x768: the NaN breakpoint read "after a dispatch that writes Na…" in the
    stepper's breakpoint list."""
    from PySide6.QtCore import QRect, Qt

    window = main_window
    window.resize(1366, 768)
    window.resizeDocks([window.docks["stepper"]], [515], Qt.Orientation.Horizontal)
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    view = window.panels["stepper"].breakpoints_view
    window.panels["stepper"].state_tabs.setCurrentWidget(view)
    window.session_bridge.add_breakpoint(Breakpoint(BreakpointKind.NAN, when="after"))
    qtbot.waitUntil(lambda: view.list.count() == 1, timeout=TIMEOUT)
    item = view.list.item(0)
    rect = view.list.visualItemRect(item)
    needed = view.list.fontMetrics().boundingRect(
        QRect(0, 0, rect.width(), 10_000), int(Qt.TextFlag.TextWordWrap), item.text()
    )
    assert view.list.fontMetrics().horizontalAdvance(item.text()) > view.list.viewport().width()  # it is long here
    assert rect.width() <= view.list.viewport().width() and rect.height() >= needed.height()
    assert item.toolTip() in item.text()


def test_the_run_dispatch_list_keeps_room_for_the_dispatch_names_in_a_narrow_window(qtbot, main_window, tmp_path):
    """Walk, EfficientViT at 1366x768: the Run Dispatch List's Source column (fitted to its widest line) left
    the Dispatch column "main$as…" for every row."""
    from PySide6.QtCore import Qt

    window, bridge = main_window, main_window.session_bridge
    window.resize(1100, 768)
    window.resizeDocks([window.docks["stepper"]], [515], Qt.Orientation.Horizontal)
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    window.workbench.set_inputs(HEALTHY)
    with qtbot.waitSignal(bridge.finished, timeout=TIMEOUT):
        assert window.workbench.run()
    runs = window.panels["run_dispatch_list"]
    window.docks["run_dispatch_list"].show()
    window.docks["run_dispatch_list"].raise_()
    qtbot.waitUntil(lambda: runs.model.rowCount() == 3 and "Source" in runs.model.shown_columns, timeout=TIMEOUT)
    columns = runs.model.shown_columns
    table = runs.table
    qtbot.waitUntil(lambda: table.isVisible() and table.viewport().width() > 100, timeout=5_000)
    metrics = table.fontMetrics()
    widest_source = max(metrics.horizontalAdvance(runs.model.source_of(r)) for r in runs.model.rows)
    widest_name = max(metrics.horizontalAdvance(r.name) for r in runs.model.rows)
    room = table.viewport().width()
    assert widest_source + widest_name > room  # the walk's condition: both cannot be whole at this width
    qtbot.waitUntil(lambda: table.columnWidth(columns.index("Dispatch")) >= int(0.4 * room) - 2, timeout=5_000)


def test_the_dispatches_panel_filters_and_forgets_its_filter_with_the_module(qtbot, main_window, tmp_path):
    """Walk, EfficientViT: the Dispatches panel listed 123 dispatches (336 calls) with no way to find one by
    name; its filter follows the run lists' rule (a part of the name or an export's, or a glob) and, like
    them, does not carry over to the next module."""
    window = main_window
    panel = window.panels["dispatches"]
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    qtbot.waitUntil(lambda: panel.dispatch_list.topLevelItemCount() == 3, timeout=TIMEOUT)
    names = panel.names()

    def shown() -> list[str]:
        items = [panel.dispatch_list.topLevelItem(i) for i in range(panel.dispatch_list.topLevelItemCount())]
        return [item.data(0, Qt.ItemDataRole.UserRole) for item in items if not item.isHidden()]

    qtbot.keyClicks(panel.filter_edit, "DISPATCH_1")
    assert shown() == [n for n in names if "dispatch_1" in n.lower()] and len(shown()) == 1
    assert "Showing 1 of 3 that match 'DISPATCH_1'" in panel.summary.text()
    panel.filter_edit.setText("*_2_*")
    assert shown() == [n for n in names if "_2_" in n] and len(shown()) == 1
    panel.filter_edit.setText("no_such_dispatch")
    assert shown() == [] and "Showing 0 of 3" in panel.summary.text()
    open_module(qtbot, window, compile_program("many_dispatches", "llvm-cpu", tmp_path))
    qtbot.waitUntil(lambda: panel.names() and panel.names() != names, timeout=TIMEOUT)
    assert panel.filter_edit.text() == "" and len(shown()) == panel.dispatch_list.topLevelItemCount()
    assert "Showing" not in panel.summary.text()


def test_inputs_typed_while_the_first_module_compiles_are_kept(qtbot, main_window, tmp_path):
    """Walk, EfficientViT at 1920x1080: inputs typed into the run bar while the .mlir compiled (77 s) were
    replaced, once it opened, by the inputs remembered from an earlier run of that file."""
    window = main_window
    panel = window.panels["stepper"]
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    typed = '--input="4x8xf32=5" --input="4x8xf32=1"'
    panel.inputs_edit.clear()
    qtbot.keyClicks(panel.inputs_edit, typed)
    assert window.workbench.module is None and window.workbench.state.inputs == ("4x8xf32=5", "4x8xf32=1")
    open_module(qtbot, window, vmfb)
    qtbot.wait(50)  # the inputs filler answers the module's function on the same turn of the event loop
    assert window.workbench.state.inputs == ("4x8xf32=5", "4x8xf32=1"), window.workbench.state.inputs
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT) as done:
        assert window.workbench.run()
    expected = np.log(np.float32(4)) ** 2  # (a - b), its log, squared: the program's three dispatches
    assert f"{expected:.6g}"[:5] in done.args[0].results_text


def test_the_paused_dispatch_tab_names_its_ordinal_first(qtbot, main_window, tmp_path):
    """Walk, SqueezeNet at 1366x768: with six documents open the paused dispatch's tab read "Dispatch…",
    which did not say which dispatch; its ordinal comes first (the tooltip holds the whole title)."""
    _stop_after_dispatch_1(qtbot, main_window, tmp_path)
    documents = main_window.documents
    document = documents.document("paused-dispatch")
    index = documents.indexOf(document)
    assert documents.tabText(index) == f"#1 {document.info.export}"
    assert documents.tabToolTip(index) == documents.title(index)  # every tab's rule: the tooltip is its title


def test_results_are_offered_beside_the_program_and_the_saved_path_is_said(qtbot, main_window, tmp_path):
    """Walk, EfficientViT at 1920x1080: Save results as .npy… opened in the application's working folder (the
    repository here), not where the model was, and the status bar named only the file."""
    window = main_window
    vmfb = compile_program("nan_log", "llvm-cpu", tmp_path)
    open_module(qtbot, window, vmfb)
    window.workbench.set_inputs(HEALTHY)
    with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT):
        assert window.workbench.run()
    results = window.panels["stepper"].results
    assert results.suggested_path() == vmfb.resolve().parent / "main_result.npy"
    with qtbot.waitSignal(window.workbench.said, timeout=5_000) as said:
        [path] = results.save_and_say(tmp_path / "out")
    assert said.args[0] == f"Saved 1 result: {tmp_path / 'out.npy'}" and path == tmp_path / "out.npy"
    assert np.array_equal(np.load(path), np.log(np.full((4, 8), 2, np.float32)) ** 2)


def test_the_dispatches_panel_shows_no_blank_pane_and_says_what_to_pick(qtbot, main_window):
    """Walk, SqueezeNet at 1366x768: before a dispatch was picked, the Dispatches panel showed an empty
    "Where it appears" table and a blank code pane taking a third of the dock."""
    from engine.samples import sample_path

    window = main_window
    panel = window.panels["dispatches"]
    window.docks["dispatches"].show()
    window.docks["dispatches"].raise_()
    with qtbot.waitSignal(window.session_bridge.opened, timeout=TIMEOUT):
        window.open_file(sample_path("mlp"))  # compiled here: its phases and executables' code are known
    qtbot.waitUntil(lambda: panel.dispatch_list.topLevelItemCount() > 0, timeout=TIMEOUT)
    assert panel.current is None  # nothing picked yet
    assert not panel.code_tabs.isVisibleTo(panel)
    assert panel.locations.topLevelItemCount() == 1
    assert panel.locations.topLevelItem(0).text(0).startswith("Pick a dispatch above")
    assert panel.select(panel.names()[0])
    assert panel.code_tabs.count() > 0 and panel.code_tabs.isVisibleTo(panel)
    assert not any(
        panel.locations.topLevelItem(i).text(0).startswith("Pick") for i in range(panel.locations.topLevelItemCount())
    )


def test_a_new_run_brings_its_command_into_view_over_the_last_results(qtbot, main_window, tmp_path):
    """Walk, SqueezeNet at 1366x768: a second run paused at dispatch #0 with the VM Stepper's output still
    showing the first run's results (the pane was scrolled into them), as if they were this run's."""
    window, panel = main_window, main_window.panels["stepper"]
    open_module(qtbot, window, compile_program("nan_log", "llvm-cpu", tmp_path))
    panel.output.setFixedHeight(60)  # the pane as short as a 1366x768 window's: results outgrow it
    window.workbench.set_inputs(HEALTHY)
    for _ in range(2):
        with qtbot.waitSignal(window.session_bridge.finished, timeout=TIMEOUT):
            assert window.workbench.run()
    bar = panel.output.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(0)  # the user reads the results from their start
    window.session_bridge.add_breakpoint(Breakpoint(BreakpointKind.DISPATCH, ordinal=1))
    window.workbench.set_inputs(("4x8xf32=1", "4x8xf32=3"))
    with qtbot.waitSignal(window.session_bridge.stopped, timeout=TIMEOUT):
        assert window.workbench.run()
    assert panel.output.toPlainText().rstrip().endswith("$ main --input=4x8xf32=1 --input=4x8xf32=3")
    assert bar.value() == bar.maximum()
