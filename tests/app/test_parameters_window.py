"""The window runs a program compiled with external parameters once it is given the archive (File > Parameter
Archive, or ``iree-lens FILE --parameters=...``): without it, the failure names the scope and where to give
it; with it, the module opens again and its run loads the weights."""

from __future__ import annotations

import pytest
from support import compile_for
from support.parameters import BIAS, PROGRAM, SCALE, write_archive

from engine.samples import sample_path

TIMEOUT = 120_000


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "state"))


def test_the_archive_given_in_the_window_reopens_the_module_and_its_run_loads_the_weights(make_main_window, qtbot,
                                                                                          tmp_path):  # fmt: skip
    vmfb = compile_for(PROGRAM, tmp_path / "mlp.vmfb", "llvm-cpu")
    (tmp_path / "weights").mkdir()  # not beside the module: the window would take it itself (next test)
    write_archive(tmp_path / "weights" / "model.irpa")

    window = make_main_window()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT) as failed:
        window.open_file(vmfb)
    assert 'parameter "model"::"weight"' in failed.args[0].message
    qtbot.waitUntil(lambda: "File > Parameter Archive" in panel.status_label.text(), timeout=TIMEOUT)

    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.session_bridge.set_parameters([f"model={tmp_path / 'weights' / 'model.irpa'}"])
    panel.function_combo.setCurrentText("main")
    panel.set_inputs(["2x4xf32=0"])
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as finished:
        panel.bridge.call("main", ("2x4xf32=0",))
    want = " ".join(f"{v:g}" for v in BIAS * SCALE)  # x = 0: the bias, scaled
    assert f"2x4xf32=[{want}][{want}]" in finished.args[0].results_text
    # Remembered with the session (a restart reopens the module with them); another module opens without.
    assert window.session_bridge.saved_session().parameters == [f"model={tmp_path / 'weights' / 'model.irpa'}"]
    other = compile_for(sample_path("mlp"), tmp_path / "other.vmfb", "llvm-cpu")
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(other)
    assert window.session_bridge.parameters == () and window.session_bridge.saved_session().parameters == []


def test_the_archive_beside_the_module_is_taken_and_said(make_main_window, qtbot, tmp_path):
    vmfb = compile_for(PROGRAM, tmp_path / "mlp.vmfb", "llvm-cpu")
    write_archive(tmp_path / "model.irpa")  # exported with it, as iree-turbine leaves them
    window = make_main_window()
    panel = window.panels["stepper"]
    with qtbot.waitSignal(panel.bridge.opened, timeout=TIMEOUT):
        window.open_file(vmfb)
    said = [m.text for m in window.messages.messages]
    assert any(f"parameters of scope 'model' from {tmp_path / 'model.irpa'}" in t for t in said), said
    with qtbot.waitSignal(panel.bridge.finished, timeout=TIMEOUT) as finished:
        panel.bridge.call("main", ("2x4xf32=0",))
    want = " ".join(f"{v:g}" for v in BIAS * SCALE)
    assert f"2x4xf32=[{want}][{want}]" in finished.args[0].results_text


def test_the_archive_dialog_offers_the_scope_the_module_loads(make_main_window, qtbot, tmp_path):
    anonymous = tmp_path / "anonymous.mlir"
    anonymous.write_text(PROGRAM.read_text().replace('"model"::', ""))
    window = make_main_window()
    panel = window.panels["stepper"]
    for source, scopes in ((PROGRAM, ["model"]), (anonymous, [""])):
        vmfb = compile_for(source, tmp_path / f"{source.stem}.vmfb", "llvm-cpu")
        with qtbot.waitSignal(panel.bridge.failed, timeout=TIMEOUT):
            window.open_file(vmfb)
        qtbot.waitUntil(lambda: window.workbench.state.module is not None, timeout=TIMEOUT)
        assert window.parameter_scopes() == scopes
