"""Run > Debug the Initializer: the module opens again with ``__init`` left to a call, which the stepper offers;
its dispatch stops and shows typed (the int4 weights unpacked), then ``main`` runs on the initialized module.
Another module opens as usual (its initializer runs as it loads)."""

from __future__ import annotations

import numpy as np
import pytest
from support import compile_for
from support.initializer import DEQUANTIZED, WEIGHTS, dequantizing_program

from engine.samples import sample_path
from engine.session.protocol import INITIALIZER, Breakpoint

TIMEOUT = 120_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_debug_the_initializer_stops_in_its_dispatch_then_the_module_runs(make_main_window, qtbot, tmp_path):
    source = tmp_path / "dequantized.mlir"
    source.write_text(dequantizing_program())
    vmfb = compile_for(source, tmp_path / "dequantized.vmfb", "llvm-cpu")
    window = make_main_window()
    panel = window.panels["stepper"]
    said = []
    window.messages.messageAdded.connect(lambda m: said.append(m.text))
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT) as opened:
        window.open_file(vmfb)
    assert INITIALIZER not in opened.args[0].functions
    # Told what it does not see, and how to see it.
    assert ("the module's initializer (__init) ran 1 dispatch as the module loaded, not stopped at (Run > Debug "
            "the Initializer stops in them)") in said
    assert panel.debug_initializer_action.isEnabled() and panel.debug_initializer_action in window.run_menu.actions()

    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT) as opened:
        panel.debug_initializer_action.trigger()
    assert opened.args[0].functions[0] == INITIALIZER
    qtbot.waitUntil(lambda: panel.function_combo.currentText() == INITIALIZER, timeout=TIMEOUT)
    panel.bridge.set_breakpoints([Breakpoint("dispatch", dispatch="*", when="after")])
    with qtbot.waitSignal(panel.bridge.stopped, timeout=TIMEOUT):
        window.run_action.trigger()
    qtbot.waitUntil(lambda: _paused_inspector(window) is not None, timeout=TIMEOUT)
    inspector = _paused_inspector(window)
    qtbot.waitUntil(lambda: inspector.tensor_list.count() == 2 and "i4" in inspector.tensor_list.item(0).text(),
                    timeout=TIMEOUT)  # typed once the rebuild of its sources is in
    inspector.tensor_list.setCurrentRow(0)
    assert np.array_equal(inspector.array, WEIGHTS)
    inspector.tensor_list.setCurrentRow(1)
    assert np.array_equal(inspector.array, DEQUANTIZED)

    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT):
        panel.bridge.continue_()
    panel.bridge.set_breakpoints([])
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as finished:
        panel.bridge.call("main", ("2x64xf32=1",))
    assert finished.args[0].function == "main"
    assert np.allclose(finished.args[0].outputs[0].to_numpy(), DEQUANTIZED.sum(axis=0), rtol=1e-6)

    other = compile_for(sample_path("mlp"), tmp_path / "other.vmfb", "llvm-cpu")
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT) as opened:
        window.open_file(other)
    assert INITIALIZER not in opened.args[0].functions


def _paused_inspector(window):
    from app.views.dispatch_run_live import PausedDispatchView

    views = [v for v in window.findChildren(PausedDispatchView) if v.info is not None]
    return views[-1].inspector if views else None
