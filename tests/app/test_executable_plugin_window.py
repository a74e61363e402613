"""The window runs a program whose kernels import functions once it is given the executable plugin that
provides them (File > Executable Plugin, or ``iree-lens FILE --executable-plugin=...``): without it, the
failure names the function and where to give it; with it, the module opens again and runs."""

from __future__ import annotations

import numpy as np
import pytest
from support import compile_for
from support.executable_plugin import SYMBOL, build_plugin
from support.session import PROGRAMS

from engine.runtime.hal.executable_plugins import forget_registered_plugins

TIMEOUT = 120_000
X = np.float32([1, -2, 3, 0.5, 8, -1, 2, 6])
Y = np.float32([4, 4, -1, 2, 0.25, 3, -2, 1])
INPUTS = ("8xf32=" + " ".join(f"{v:g}" for v in X), "8xf32=" + " ".join(f"{v:g}" for v in Y))


@pytest.fixture(autouse=True)
def no_plugins():
    forget_registered_plugins()  # the process's (an in-process session's): none asked before or after
    yield
    forget_registered_plugins()


def test_the_plugin_given_in_the_window_reopens_the_module_and_it_runs(make_main_window, qtbot, tmp_path):
    vmfb = compile_for(PROGRAMS / "custom_dispatch" / "mul_plugin.mlir", tmp_path / "mul_plugin.vmfb", "llvm-cpu")
    plugin = build_plugin(tmp_path / "plugin.sos")
    window = make_main_window()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT) as failed:
        window.open_file(vmfb)
    assert f"imports '{SYMBOL}'" in failed.args[0].message
    qtbot.waitUntil(lambda: "File > Executable Plugin" in panel.status_label.text(), timeout=TIMEOUT)

    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.session_bridge.add_executable_plugins([str(plugin)])
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as finished:
        panel.bridge.call("mul_add", INPUTS)
    assert "8xf32=" + " ".join(f"{v:g}" for v in X * Y + Y) in finished.args[0].results_text
    # Kept for the next module, as IREE keeps a plugin for the process.
    assert window.session_bridge.executable_plugins == (str(plugin),)


def test_a_restored_session_opens_its_module_with_its_plugins(make_main_window, qtbot, tmp_path):
    vmfb = compile_for(PROGRAMS / "custom_dispatch" / "mul_plugin.mlir", tmp_path / "mul_plugin.vmfb", "llvm-cpu")
    plugin = build_plugin(tmp_path / "plugin.sos")
    first = make_main_window()
    first.session_bridge.add_executable_plugins([str(plugin)])
    with qtbot.waitSignal(first.panels["stepper"].bridge.opened, timeout=TIMEOUT):
        first.open_file(vmfb)
    assert first.session_bridge.saved_session().executable_plugins == [str(plugin)]

    forget_registered_plugins()  # a new application: none given yet
    window = make_main_window()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        assert panel.restore_last_session()
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as finished:
        panel.bridge.call("mul_add", INPUTS)
    assert "8xf32=" + " ".join(f"{v:g}" for v in X * Y + Y) in finished.args[0].results_text
