"""Dispatch breakpoints in the stepper: the window's one session bridge, dispatch stops published on the
context (what a tensor view shows), binding bytes on request, Next Dispatch (F6), NaN stops on the CPU
and on Vulkan (lavapipe). The program (``session_programs/nan_log.mlir``) is compiled with iree-compile.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support.app import TIMEOUT, add_breakpoint, open_in_stepper, read_bindings
from support.session import compile_program

from app.session_bridge import DEVICE_KEY
from app.settings import open_settings
from engine.session.protocol import DispatchInfo

HEALTHY = ("4x8xf32=3", "4x8xf32=1")
NAN = ("4x8xf32=1", "4x8xf32=2")


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return tmp_path_factory.mktemp("stepper_dispatch")


def test_the_window_hands_one_bridge_to_every_panel(main_window):
    bridge = main_window.session_bridge
    assert main_window.services.session_bridge is bridge
    assert main_window.panels["stepper"].bridge is bridge


def test_dispatch_breakpoint_next_dispatch_and_bindings(qtbot, main_window, programs):
    vmfb = compile_program("nan_log", "llvm-cpu", programs)
    panel = open_in_stepper(qtbot, main_window, vmfb)
    add_breakpoint(qtbot, panel, "dispatch", "1", "after")
    assert panel.breakpoints_view.list.item(0).text() == "● after dispatch #1"
    panel.set_inputs(HEALTHY)
    published, progress = [], []
    main_window.workbench.stateChanged.connect(lambda state: published.append(state.paused))
    panel.bridge.progressed.connect(progress.append)
    # Every Progress reaches the panel in this test: at the window's PROGRESS_INTERVAL, which of the run's
    # reports passes depends on how fast the two dispatches ran (a VM location could be the only one).
    panel.bridge.client.progress_interval = 0.0
    with qtbot.waitSignal(panel.bridge.dispatchStopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    info = blocker.args[0]
    assert isinstance(info, DispatchInfo) and info.ordinal == 1 and info.when == "after"
    # The window's one run state holds the stop; the context's position names no run ordinal.
    assert main_window.workbench.state.paused == info and published[-1] == info
    assert main_window.workbench.state.dispatch == 1 and main_window.workbench.state.stop.location.dispatch_info == info
    assert "#1 main_dispatch_1" in panel.status_label.text()
    assert main_window.context.dispatch is None
    # Progress reached the panel while it ran (the dispatch it was running).
    running = [p.location.dispatch for p in progress if p.location.dispatch]
    assert running and running[0].startswith(("main_dispatch_0", "main_dispatch_1")), [p.location for p in progress]
    # The tensors of the paused dispatch, on request (the tensor inspector's path).
    arrays = read_bindings(qtbot, panel.bridge, TIMEOUT)
    assert panel.bridge.client.last_stop.location.dispatch_info == info  # read at the dispatch it stopped at
    assert np.allclose(arrays[1].view(np.float32), np.log(2.0))
    # F6: the next dispatch, before it runs.
    assert panel.next_dispatch_action.isEnabled()
    with qtbot.waitSignal(panel.bridge.dispatchStopped, timeout=TIMEOUT) as blocker:
        qtbot.keyClick(panel.listing, Qt.Key.Key_F6)
    assert blocker.args[0].ordinal == 2 and blocker.args[0].when == "before"
    assert None in published[published.index(info):]  # the run moved on between the two stops
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        qtbot.keyClick(panel.listing, Qt.Key.Key_F5)
    assert main_window.workbench.state.paused is None and main_window.workbench.state.outcome == "finished"


@pytest.mark.parametrize("target, device", [("llvm-cpu", "local-sync"), ("vulkan-spirv", "vulkan")])
def test_nan_breakpoint_on_cpu_and_vulkan(qtbot, make_main_window, programs, target, device):
    if device == "vulkan":
        from engine.runtime.hal.vulkan.loader import vulkan_available

        reason = vulkan_available()
        if reason is not None:
            pytest.skip(f"no Vulkan: {reason}")
    settings = open_settings()
    settings.setValue(DEVICE_KEY, device)  # the device choice travels through the settings
    settings.sync()
    window = make_main_window()
    vmfb = compile_program("nan_log", target, programs)
    panel = open_in_stepper(qtbot, window, vmfb)
    assert panel.device_label.text() == f"on {device}"
    add_breakpoint(qtbot, panel, "nan")
    panel.set_inputs(NAN)
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    stop = blocker.args[0]
    assert stop.reason == "dispatch" and stop.detail.nan_bindings == (1,)
    assert stop.location.dispatch_info.ordinal == 1
    assert "NaN/Inf written" in panel.status_label.text()
