"""Debugging a module's initializer: ``Open(initializer=True)`` leaves ``__init`` to a call, so the dispatches
IREE's const-expr hoisting puts there (here an int4 weight's dequantization, as an int4 model has it) stop and
show like a call's. Was: the initializer ran as the module loaded, its dispatches never seen
(``capture`` counted them, "not captured"; ``--function=__init`` was "not found").

The program is written here (weights by a formula, the expected values computed with numpy), compiled with
the real iree-compile; the call after it is compared with IREE's runtime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import compile_for, lens_in_process
from support.initializer import DEQUANTIZED, WEIGHTS, K, N, dequantizing_program
from support.session import Events

from engine.runtime.function_io import Tensor
from engine.runtime.reference import ReferenceRunner
from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    INITIALIZER,
    Breakpoint,
    Call,
    Continue,
    Failed,
    Finished,
    Log,
    Open,
    Opened,
    ReadTensors,
    Reverse,
    ReverseMode,
    SetBreakpoints,
    Stopped,
    Tensors,
)
from engine.session.reference_session import ReferenceSession
from engine.session.timetravel_session import TimeTravelSession


@pytest.fixture(scope="module")
def module(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("initializer")
    source = folder / "dequantized.mlir"
    source.write_text(dequantizing_program())
    return compile_for(source, folder / "dequantized.vmfb", "llvm-cpu",
                       f"--iree-hal-dump-executable-sources-to={folder / 'sources'}")


X = np.linspace(-1, 1, 2 * K, dtype=np.float32).reshape(2, K)


def _x_file(tmp_path: Path) -> str:
    np.save(tmp_path / "x.npy", X)
    return f"@{tmp_path / 'x.npy'}"


def _next(events: Events, timeout: float = 120):
    while True:
        event = events.next(timeout)
        if not isinstance(event, Log):
            return event


def test_the_initializer_runs_as_a_call_its_dispatch_stopped_and_typed_then_the_module_runs(module, tmp_path):
    events = Events()
    session = InProcessSession(DebugSession, events)
    try:
        session.send(Open(str(module), initializer=True))
        opened = _next(events)
        assert isinstance(opened, Opened) and opened.functions[0] == INITIALIZER and "main" in opened.functions
        session.send(Call("main", (_x_file(tmp_path),)))  # its globals are not set yet
        refused = _next(events)
        assert isinstance(refused, Failed) and "initializer (__init) has not run" in refused.message
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="after"),)))
        session.send(Call(INITIALIZER))
        stop = _next(events)
        assert isinstance(stop, Stopped) and "_initializer_0_dispatch_0" in stop.location.dispatch_info.export
        assert stop.location.frames[0].function == INITIALIZER
        session.send(ReadTensors(wait_for_sources=True))
        tensors = _next(events, 600)
        assert isinstance(tensors, Tensors)
        # IREE folds the 16 scales into the kernel: the weights come in, the dequantized weights go out.
        (weights,), (dequantized,) = ([t for t in tensors.tensors if t.role == role] for role in ("input", "output"))
        # The weights as the program wrote them (packed, low bits first), the dequantized result computed here.
        packed = weights.tensor.to_numpy()
        assert weights.declared == f"{K}x{N}xi4" and packed.size == K * N // 2
        low, high = (packed & 0xF).astype(np.int8), (packed >> 4).astype(np.int8)
        unpacked = np.stack([low, high], axis=-1).reshape(K, N)
        assert np.array_equal(np.where(unpacked > 7, unpacked - 16, unpacked), WEIGHTS)
        assert np.array_equal(dequantized.tensor.to_numpy(), DEQUANTIZED)
        session.send(Continue())
        assert isinstance(_next(events), Finished)
        session.send(SetBreakpoints(()))
        session.send(Call("main", (_x_file(tmp_path),)))
        finished = _next(events)
        assert isinstance(finished, Finished), finished
        expected = ReferenceRunner(module, "local-sync").invoke("main", [Tensor.from_numpy(X)])[0].array
        assert np.array_equal(finished.outputs[0].to_numpy(), expected)
        # Called again, the initializer runs on the module opened afresh, and stops again.
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="after"),)))
        session.send(Call(INITIALIZER))
        assert isinstance(_next(events), Opened)
        again = _next(events)
        assert isinstance(again, Stopped) and again.location.frames[0].function == INITIALIZER
        # Run again while paused in it: not on globals half set, on the module opened afresh.
        session.send(Call(INITIALIZER))
        assert isinstance(_next(events), Opened)
        assert isinstance(_next(events), Stopped)
    finally:
        session.close()


def test_the_initializer_called_on_a_module_opened_as_usual_opens_it_afresh_and_runs(module):
    # IREE runs __init once, on globals it has not set: called after it ran as the module opened, the session
    # opens the module again with it left to the call (Opened, __init listed), then stops in it.
    events = Events()
    session = InProcessSession(DebugSession, events)
    try:
        session.send(Open(str(module)))
        opened = _next(events)
        assert INITIALIZER not in opened.functions and opened.initializer_dispatches == 1
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="after"),)))
        session.send(Call(INITIALIZER))
        opened = _next(events)
        assert isinstance(opened, Opened) and opened.functions[0] == INITIALIZER
        stop = _next(events)
        assert isinstance(stop, Stopped) and stop.location.frames[0].function == INITIALIZER
    finally:
        session.close()
    events = Events()
    reference = InProcessSession(ReferenceSession, events)
    try:
        reference.send(Open(str(module), initializer=True))
        failed = _next(events)
        assert isinstance(failed, Failed) and "use the debug engine" in failed.message
    finally:
        reference.close()


def test_reverse_continue_inside_the_initializer_goes_back_to_its_start(module):
    events: list = []
    session = TimeTravelSession(events.append)
    session.handle(Open(str(module), initializer=True))
    session.handle(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="after"),)))
    session.handle(Call(INITIALIZER))
    assert isinstance(events[-1], Stopped) and events[-1].reason == "dispatch"
    session.handle(Reverse(ReverseMode.CONTINUE))
    assert events[-1].reason == "history-start" and events[-1].location.frames[0].function == INITIALIZER
    session.handle(Continue())
    assert events[-1].reason == "dispatch"
    session.handle(Continue())
    assert isinstance(events[-1], Finished) and events[-1].function == INITIALIZER
    assert not any(isinstance(e, Failed) for e in events), events


def test_debug_function_init_stops_in_the_initializer_and_saves_its_values(module, tmp_path):
    script = tmp_path / "init.cmd"
    script.write_text(f"break dispatch * after\ncontinue\nsave-tensors {tmp_path / 'saved'}\ncontinue\n")
    proc = lens_in_process("debug", str(module), f"--function={INITIALIZER}", f"--commands={script}")
    assert proc.returncode == 0, proc.stderr
    assert "after dispatch #0 _initializer_0_dispatch_0" in proc.stdout and "Finished __init" in proc.stdout
    assert "not stopped at" not in proc.stderr  # its dispatches are the call's
    assert np.array_equal(np.load(tmp_path / "saved" / "dispatch0_after_input0.npy"), WEIGHTS)  # i4 values
    assert np.array_equal(np.load(tmp_path / "saved" / "dispatch0_after_output0.npy"), DEQUANTIZED)
    # Debugging another function, the one the initializer ran is said, with how to stop in it.
    proc = lens_in_process("debug", str(module), "--function=main", "--input=2x64xf32=1", f"--commands={script}")
    assert ("the module's initializer (__init) ran 1 dispatch as the module loaded, not stopped at "
            "(--function=__init stops in them)") in proc.stderr


def test_a_vs_code_launch_of_the_initializer_stops_in_it(module):
    # Was: "function '__init' is not exported" (the launch opened the module, which ran it).
    from support.dap import DapClient, lens_command

    client = DapClient([*lens_command(), "dap"])
    try:
        client.request("initialize", {"adapterID": "iree-lens"})
        client.request("launch", {"program": str(module), "function": INITIALIZER, "stopOnEntry": True})
        client.request("configurationDone")
        assert client.stopped()["reason"] == "entry"
        assert client.top_frame()["name"] == INITIALIZER
    finally:
        client.close()


def test_capture_of_the_initializer_keeps_its_dispatches(module, tmp_path):
    from engine.dispatch.bundle import Bundle

    proc = lens_in_process("capture", str(module), f"--function={INITIALIZER}", f"--out={tmp_path / 'init'}")
    assert proc.returncode == 0, proc.stderr
    (entry,) = Bundle(tmp_path / "init").dispatches
    assert entry.name.startswith("_initializer_0_dispatch_0") and entry.tensors_from == "interface"
    assert np.array_equal(Bundle(tmp_path / "init").dispatch_tensors(entry, "outputs")[0], DEQUANTIZED)
    # The call's capture counts them and says how to keep them.
    proc = lens_in_process("capture", str(module), "--function=main", "--input=2x64xf32=1", f"--out={tmp_path / 'main'}")
    assert "initializer ran 1 dispatch before the call, not captured (--function=__init captures them)" in proc.stdout
    proc = lens_in_process("capture", str(module), f"--function={INITIALIZER}", "--engine=reference",
                           f"--out={tmp_path / 'reference'}")
    assert proc.returncode == 1 and "capture it with --engine=debug" in proc.stderr


def test_a_runner_made_to_call_the_initializer_runs_it_once_as_the_call(module, tmp_path):
    # IREE runs __init once: a runner that ran it as the module loaded and then as the call ran it twice (every
    # command given --function=__init did: run, profile, kernel, diverge, benchmark).
    from engine.runtime.debug_runner import DebugRunner

    loaded = DebugRunner(module)
    assert loaded.device.dispatch_count == 1
    deferred = DebugRunner(module, run_init=False)
    assert deferred.device.dispatch_count == 0
    deferred.invoke(INITIALIZER, [])
    assert deferred.device.dispatch_count == 1
    # kernel: a workgroup of its dispatch, stepped; its stores are the dequantized weights.
    proc = lens_in_process("kernel", str(module), f"--function={INITIALIZER}", "--dispatch=0", "--workgroup=0,0,0",
                           "--json")
    assert proc.returncode == 0, proc.stderr
    assert any('"store"' in line for line in proc.stdout.splitlines()), proc.stdout[-2000:]


def test_inspect_says_which_dispatches_the_initializer_runs(module):
    proc = lens_in_process("inspect", str(module), "--output=executables")
    assert proc.returncode == 0, proc.stderr
    exports = [line for line in proc.stdout.splitlines() if line.startswith("  export ")]
    assert len(exports) == 2
    (init,) = [line for line in exports if "_initializer_0_dispatch_0" in line]
    assert init.endswith("(in __init, run as the module loads: --function=__init stops in it)")
    assert not [line for line in exports if "main_dispatch" in line][0].endswith(")")
