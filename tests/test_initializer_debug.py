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

K, N = 64, 16
WEIGHTS = (np.add.outer(np.arange(K) * 5, np.arange(N) * 3) % 16) - 8  # int4's range, -8..7
SCALES = (np.arange(N) % 4 + 1) * 0.25
DEQUANTIZED = (WEIGHTS * SCALES).astype(np.float32)


def _program() -> str:
    rows = ", ".join("[" + ", ".join(map(str, r)) + "]" for r in WEIGHTS)
    return f"""
util.global private @weights = dense<[{rows}]> : tensor<{K}x{N}xi4>
util.global private @scales = dense<[{", ".join(map(str, SCALES))}]> : tensor<{N}xf32>
func.func @main(%x: tensor<2x{K}xf32>) -> tensor<2x{N}xf32> {{
  %w = util.global.load @weights : tensor<{K}x{N}xi4>
  %s = util.global.load @scales : tensor<{N}xf32>
  %init = tensor.empty() : tensor<{K}x{N}xf32>
  %dequantized = linalg.generic {{
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}}
      ins(%w, %s : tensor<{K}x{N}xi4>, tensor<{N}xf32>) outs(%init : tensor<{K}x{N}xf32>) {{
  ^bb0(%q: i4, %scale: f32, %out: f32):
    %wide = arith.extsi %q : i4 to i32
    %f = arith.sitofp %wide : i32 to f32
    %v = arith.mulf %f, %scale : f32
    linalg.yield %v : f32
  }} -> tensor<{K}x{N}xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2x{N}xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<2x{N}xf32>) -> tensor<2x{N}xf32>
  %y = linalg.matmul ins(%x, %dequantized : tensor<2x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%acc : tensor<2x{N}xf32>) -> tensor<2x{N}xf32>
  return %y : tensor<2x{N}xf32>
}}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("initializer")
    source = folder / "dequantized.mlir"
    source.write_text(_program())
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
    finally:
        session.close()


def test_without_the_initializer_left_to_a_call_calling_it_says_how(module):
    events = Events()
    session = InProcessSession(DebugSession, events)
    try:
        session.send(Open(str(module)))
        assert INITIALIZER not in _next(events).functions
        session.send(Call(INITIALIZER))
        failed = _next(events)
        assert isinstance(failed, Failed) and "ran when the module was opened" in failed.message
        assert "--function=__init" in failed.message
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
    assert np.array_equal(np.load(tmp_path / "saved" / "dispatch0_after_input0.npy"), WEIGHTS)  # i4 values
    assert np.array_equal(np.load(tmp_path / "saved" / "dispatch0_after_output0.npy"), DEQUANTIZED)
