"""Time travel on Vulkan inside one command buffer: Previous Dispatch does not run the kernels before it again.

A model's dispatches share one ``hal.device.queue.execute`` instruction, and checkpoints are only taken
between instructions, so going back to dispatch N-1 from N replays the command buffer from its first
dispatch. The dispatch memo (``engine/timetravel/dispatch_memo.py``) writes the bytes each kept dispatch
left instead of running its kernel again; this proves on lavapipe that the bindings seen after such a
travel are those of a fresh forward run stopped at N-1, and that no kernel before N-1 ran during it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.session import TimeTravelClient, compile_program

from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.session.protocol import Step, Stopped, TravelTo

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


@pytest.mark.vulkan
def test_previous_dispatch_inside_one_command_buffer_writes_kept_results(tmp_path):
    reason = vulkan_available()
    if reason is not None:
        pytest.skip(f"no Vulkan device: {reason}")
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    module = compile_program(str(source), "vulkan-spirv", tmp_path)
    inputs = [f"@{MODELS / 'small_cnn_x.npy'}"]

    # The expectation: a fresh forward run stopped at each dispatch (Next Dispatch).
    forward = TimeTravelClient(module, "small_cnn", inputs, "vulkan")
    seen = []
    while True:
        forward.events.clear()
        forward.session.handle(Step("dispatch"))
        if not isinstance(forward.events[-1], Stopped):
            break
        seen.append(forward.bindings())
    assert len(seen) >= 3

    c = TimeTravelClient(module, "small_cnn", inputs, "vulkan", memo_seconds=0.0)  # lavapipe runs its kernels fast
    memo = c.session.travel.memo
    last = len(seen) - 1
    for _ in range(last + 1):  # parked inside the last dispatch, as a user at dispatch N
        stop = c.send(Step("dispatch"))
    assert stop.location.dispatch_info.ordinal == last
    assert memo.kernels_run == last and len(memo.kept) == last  # each dispatch before N ran once, was kept
    for k in reversed(range(last)):  # Previous Dispatch, again and again
        run, written = memo.kernels_run, memo.kernels_written
        stop = c.send(TravelTo(dispatch=k, park=True))
        assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == k
        assert memo.kernels_run == run, "a kernel ran again during the travel"
        assert memo.kernels_written - written >= k  # dispatches 0..k-1 were written from the memo
        got = c.bindings()
        assert len(got) == len(seen[k])
        for a, b in zip(got, seen[k]):
            np.testing.assert_array_equal(a, b)


def _travel(path, memo_seconds):
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.timetravel import TimeTravel

    runner = DebugRunner(path, "local-sync")
    tt = TimeTravel.for_runner(runner, interval=64, adaptive=False, memo_seconds=memo_seconds)
    kinds = split_cconv(runner.cconv("repeat_double"))[0]
    args = [runner.to_vm(k, v) for k, v in zip(kinds, parse_inputs(["4xf32=1 2 3 4", "6"], kinds))]
    tt.begin_call("repeat_double", args)
    tt.continue_()
    return tt


def test_states_rebuilt_from_kept_results_equal_states_rebuilt_by_running_the_kernels(compiled):
    """Every dispatch kept (CPU, threshold 0): going back to before and after each dispatch gives the state
    that a history without the memo (every kernel run again) gives at the same position."""
    from engine.timetravel.state import describe_state

    path = compiled.path("control_flow", "llvm-cpu")
    kept, plain = _travel(path, 0.0), _travel(path, float("inf"))
    dispatches = sorted(kept.dispatch_log)
    assert len(dispatches) >= 6 and len(kept.memo.kept) == len(dispatches) and not plain.memo.kept
    run = kept.memo.kernels_run
    for ordinal in reversed(dispatches):
        for when in ("after", "before"):
            kept.goto_dispatch(ordinal, when)
            plain.goto_dispatch(ordinal, when)
            assert describe_state(kept.interpreter, kept.instances, kept.devices) == describe_state(
                plain.interpreter, plain.instances, plain.devices
            ), (ordinal, when)
    assert kept.memo.kernels_run == run and kept.memo.kernels_written > 0
    assert plain.memo.kernels_written == 0
