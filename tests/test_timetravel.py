"""Time travel on real compiled samples: ``step N`` + ``reverse-step K`` is exactly ``step N-K``.

Each expectation comes from an independent forward run: a fresh runner stepped N-K instructions. States
are compared by ``describe_state`` (frames, pcs, both register banks, globals, lists, buffer bytes read
back from the device). Runs cover dispatches (llvm-cpu, vmvx, Vulkan on lavapipe), a loop of dispatches,
a mutable global changed by an earlier call, and checkpoint intervals small enough that a reverse step
restores an intermediate checkpoint rather than the start.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import RUN_CASES

from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs, split_cconv
from engine.runtime.hal.buffers import HalBufferView
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.vm.controller import FunctionBreakpoint, ImportBreakpoint
from engine.timetravel import (
    GlobalWatch,
    RegisterWatch,
    TimeTravel,
    TimeTravelError,
    describe_state,
    watch_element,
)

_NO_VULKAN = vulkan_available()
EXECUTE = "hal.device.queue.execute.indirect"  # the samples record command buffers once, in __init
DEVICE = {"llvm-cpu": "local-sync", "vmvx": "local-sync", "vulkan-spirv": "vulkan"}


def _target_or_skip(target: str) -> None:
    if target == "vulkan-spirv" and _NO_VULKAN is not None:
        pytest.skip(f"no Vulkan: {_NO_VULKAN}")


class Run:
    """A runner with time travel, the call begun (after ``before`` earlier calls run to completion)."""

    def __init__(self, path, target, function, inputs, *, interval=64, before=(), budget=512 << 20):
        self.runner = DebugRunner(path, DEVICE[target])
        for fn, ins in before:
            self.runner.invoke(fn, parse_inputs(list(ins), split_cconv(self.runner.cconv(fn))[0]))
        self.tt = TimeTravel.for_runner(self.runner, interval=interval, budget_bytes=budget, adaptive=False)
        kinds = split_cconv(self.runner.cconv(function))[0]
        args = [self.runner.to_vm(k, v) for k, v in zip(kinds, parse_inputs(list(inputs), kinds))]
        self.tt.begin_call(function, args)

    def state(self) -> dict:
        return describe_state(self.tt.interpreter, self.tt.instances, self.tt.devices)


CASES = [
    ("control_flow", "collatz_steps", ["27"], ()),
    ("control_flow", "repeat_double", ["4xf32=1 2 3 4", "6"], ()),
    ("globals", "accumulate", ["4xf32=1 2 3 4"], (("accumulate", ["4xf32=0.5"]),)),
    ("mlp", "main", ["2x16xf32=0.25"], ()),
]


def _cases(targets):
    return [
        pytest.param(t, *c, id=f"{c[0]}.{c[1]}-{t}")
        for t in targets
        for c in CASES
    ]


@pytest.mark.parametrize("target,sample,function,inputs,before", _cases(["llvm-cpu", "vmvx", "vulkan-spirv"]))
def test_step_then_reverse_step_equals_step_n_minus_k(compiled, target, sample, function, inputs, before):
    _target_or_skip(target)
    path = compiled.path(sample, target)
    whole = Run(path, target, function, inputs, before=before)
    end = whole.tt.continue_()
    assert end.reason == "done", end
    total = whole.tt.position
    assert total > 5
    expected: dict[int, dict] = {}

    def state_after(n: int) -> dict:
        if n not in expected:
            run = Run(path, target, function, inputs, before=before)
            run.tt.step(n)
            assert run.tt.position == n
            expected[n] = run.state()
        return expected[n]

    run = Run(path, target, function, inputs, before=before, interval=16)
    ns = sorted({total, total - 1, total // 2, total // 3 + 1, 4})
    for n in ns:
        run.tt.goto(0) if run.tt.position > n else None
        run.tt.step(n - run.tt.position)
        assert run.tt.position == n
        for k in sorted({1, 2, n // 2, n}):
            if k > n:
                continue
            run.tt.goto(n)  # forward again (replayed) before each reverse step
            stop = run.tt.reverse_step(k)
            assert stop.position == n - k
            assert run.state() == state_after(n - k), (n, k)
    # Going back across the checkpoints did not disturb the rest: forward again to the end, same results.
    again = run.tt.continue_()
    assert again.reason == "done"
    assert run.tt.position == total
    assert run.state() == whole.state()


def test_reverse_step_across_dispatches_restores_buffer_bytes(compiled):
    """After the run, go back before the last dispatch: the output buffer holds what it held then."""
    path = compiled.path("control_flow", "llvm-cpu")
    run = Run(path, "llvm-cpu", "repeat_double", ["4xf32=1 2 3 4", "5"])
    run.tt.continue_()
    results = run.tt.interpreter.results
    view = results[0]
    assert isinstance(view, HalBufferView)
    np.testing.assert_array_equal(view.to_numpy(), np.array([32, 64, 96, 128], np.float32))
    assert len(run.tt.dispatch_log) >= 5
    last = max(run.tt.dispatch_log)
    run.tt.goto_dispatch(last, "before")
    mark = run.tt.dispatch_log[last]
    assert mark.exact and run.tt.position == mark.position
    assert run.tt.dispatch_count == last
    run.tt.goto_dispatch(last, "after")
    assert run.tt.dispatch_count == last + 1


def test_reverse_continue_stops_at_the_previous_breakpoint_hit(compiled):
    path = compiled.path("control_flow", "llvm-cpu")
    run = Run(path, "llvm-cpu", "repeat_double", ["4xf32=1 2 3 4", "4"])
    c = run.tt.controller
    c.add_breakpoint(ImportBreakpoint(EXECUTE))
    hits = []
    while True:
        stop = run.tt.continue_()
        if stop.reason != "breakpoint":
            break
        hits.append((run.tt.position, run.state()))
    assert stop.reason == "done"
    assert len(hits) >= 4
    # Back from the end: each reverse-continue lands on the previous hit, in reverse order, same state.
    for position, state in reversed(hits):
        back = run.tt.reverse_continue()
        assert back.reason == "breakpoint", back
        assert back.position == position
        assert back.breakpoints == (ImportBreakpoint(EXECUTE),)
        assert run.state() == state
    assert run.tt.reverse_continue().reason == "history-start"
    assert run.tt.position == 0


def test_reverse_continue_to_a_dispatch_stop(compiled):
    path = compiled.path("control_flow", "vmvx")
    run = Run(path, "vmvx", "repeat_double", ["4xf32=1 2 3 4", "4"])
    run.tt.continue_()
    # Stop after any dispatch that wrote a value above 20 (a data condition, like a NaN stop).
    def big(record, when):
        return when == "after" and any(b.data.view(np.float32).max() > 20 for b in record.bindings)

    stop = run.tt.reverse_continue(big)
    assert stop.reason == "dispatch" and stop.when == "after"
    last = max(run.tt.dispatch_log)
    assert stop.dispatch.ordinal == last
    assert run.tt.position == run.tt.dispatch_log[last].position + 1




@pytest.fixture(scope="module")
def calls_vmfb(tmp_path_factory):
    from support.session import compile_program

    return compile_program("bump_twice", "llvm-cpu", tmp_path_factory.mktemp("calls"))


def test_reverse_next_and_finish_over_bytecode_calls(calls_vmfb):
    run = Run(calls_vmfb, "llvm-cpu", "twice", ["5"], interval=2)
    tt, t = run.tt, run.tt.interpreter
    depths = [len(t.frames)]
    while not t.finished:
        tt.step()
        depths.append(len(t.frames) if not t.finished else 0)
    assert tt.interpreter.results == [49]
    calls = [p for p in range(len(depths) - 1) if depths[p + 1] > depths[p]]  # positions of call instructions
    assert len(calls) == 2
    second = calls[1]
    # Inside the second callee, two instructions in: reverse-finish goes back to its call instruction.
    tt.goto(second + 3)
    stop = tt.reverse_finish()
    assert stop.position == second and len(t.frames) == 1
    # Right after the first call returned: reverse-next steps back over the whole callee to its call.
    returned = next(p for p in range(calls[0] + 1, len(depths)) if depths[p] == 1)
    tt.goto(returned)
    back = tt.reverse_next()
    assert back.position == calls[0]
    assert run.state() == _stepped(calls_vmfb, "twice", ["5"], calls[0])
    # reverse-next inside the callee is a reverse step of the callee's own instructions.
    tt.goto(second + 3)
    assert tt.reverse_next().position == second + 2
    with pytest.raises(TimeTravelError, match="outermost"):
        tt.goto(second)
        tt.reverse_finish()


def _stepped(path, function, inputs, n, target="llvm-cpu"):
    fresh = Run(path, target, function, inputs)
    fresh.tt.step(n)
    return fresh.state()


def test_watch_finds_the_instruction_that_last_wrote(compiled):
    path = compiled.path("globals", "llvm-cpu")
    run = Run(path, "llvm-cpu", "accumulate", ["4xf32=1 2 3 4"], before=(("accumulate", ["4xf32=0.5"]),))
    tt = run.tt
    inst = tt.instances[-1]
    before = bytes(inst.rwdata)
    # Step until a primitive global changes (the call counter), remembering where.
    changed_at = None
    while not tt.interpreter.finished:
        at = tt.interpreter.top.location
        tt.step()
        if bytes(inst.rwdata) != before:
            changed_at = (tt.position - 1, at)
            break
    assert changed_at is not None
    offset = next(i for i, (a, b) in enumerate(zip(before, inst.rwdata)) if a != b)
    tt.step(2)
    change = tt.last_change(GlobalWatch(inst.name, offset - offset % 4, 4))
    assert change is not None
    assert change.position == changed_at[0]
    assert (change.function, change.pc) == (changed_at[1].function, changed_at[1].pc)
    assert int.from_bytes(change.after, "little") == int.from_bytes(change.before, "little") + 1
    assert tt.position == changed_at[0] + 3  # the state is left where it was


def test_watch_register_and_buffer_element_written_by_a_dispatch(compiled):
    path = compiled.path("control_flow", "llvm-cpu")
    run = Run(path, "llvm-cpu", "repeat_double", ["4xf32=1 2 3 4", "3"])
    tt = run.tt
    tt.continue_()
    out = tt.interpreter.results[0]
    change = tt.last_change(watch_element(out, 2))
    assert change is not None
    assert change.dispatch == max(tt.dispatch_log)
    assert np.frombuffer(change.after, np.float32)[0] == 24.0
    # The register holding the loop counter: its last write is before the loop exit.
    tt.reverse_step(1)
    reg = RegisterWatch(0, "i", 0)
    c = tt.last_change(reg)
    assert c is None or c.position < tt.position


def test_history_is_bounded_and_says_how_far_back(compiled):
    path = compiled.path("control_flow", "llvm-cpu")
    run = Run(path, "llvm-cpu", "repeat_double", ["4xf32=1 2 3 4", "30"], interval=8, budget=60_000)
    run.tt.continue_()
    assert run.tt.memory_bytes <= 60_000 or len(run.tt.checkpoints) == 1
    earliest = run.tt.earliest
    assert earliest > 0
    with pytest.raises(TimeTravelError, match="starts at"):
        run.tt.goto(earliest - 1)
    stop = run.tt.reverse_step(run.tt.position)
    assert stop.reason == "history-start" and stop.position == earliest


def test_function_breakpoint_and_forward_stops_are_unchanged_by_recording(compiled):
    """A checkpoint boundary must not swallow a breakpoint: same stops with and without history."""
    path = compiled.path("mlp", "llvm-cpu")
    positions = []
    for interval in (1, 3, 1 << 30):
        run = Run(path, "llvm-cpu", "main", ["2x16xf32=0.25"], interval=interval)
        run.tt.controller.add_breakpoint(ImportBreakpoint(EXECUTE))
        run.tt.controller.add_breakpoint(FunctionBreakpoint("main"))
        seen = []
        while (stop := run.tt.continue_()).reason == "breakpoint":
            seen.append(run.tt.position)
        assert stop.reason == "done"
        positions.append(seen)
    assert positions[0] == positions[1] == positions[2] and positions[0]


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
@pytest.mark.parametrize("sample,function,inputs", RUN_CASES, ids=[f"{c[0]}.{c[1]}" for c in RUN_CASES])
def test_every_run_case_goes_back_exactly(compiled, target, sample, function, inputs):
    """The samples `iree-lens run` is tested on (f16, i8, dynamic shapes, a 64 KiB constant...)."""
    path = compiled.path(sample, target)
    run = Run(path, target, function, inputs, interval=8)
    assert run.tt.continue_().reason == "done"
    total = run.tt.position
    for n, k in ((total - 1, total // 2), (total, 1)):
        run.tt.goto(n)
        run.tt.reverse_step(k)
        fresh = Run(path, target, function, inputs)
        fresh.tt.step(n - k)
        assert run.state() == fresh.state(), (n, k)


def test_a_long_search_is_interrupted_by_pause_and_leaves_the_state_where_it_was(compiled):
    import threading

    path = compiled.path("control_flow", "llvm-cpu")
    run = Run(path, "llvm-cpu", "collatz_steps", ["27"], interval=1 << 20)
    run.tt.continue_()
    run.tt.reverse_step(5)
    here, state = run.tt.position, run.state()
    gate = threading.Event()
    original = run.tt.interpreter.run

    def slow_run(*a, **kw):  # the first replayed instruction asks for a pause, as a user would
        gate.set()
        run.tt.controller.pause()
        return original(*a, **kw)

    run.tt.interpreter.run = slow_run
    try:
        with pytest.raises(TimeTravelError, match="interrupted"):
            run.tt.last_change(RegisterWatch(0, "i", 2))
    finally:
        del run.tt.interpreter.run
    assert gate.is_set()
    assert run.tt.position == here and run.state() == state


def test_reverse_next_and_finish_follow_the_depth_rule_at_every_position(calls_vmfb):
    """reverse-next: the last earlier position at this depth or shallower; reverse-finish: the last
    earlier position shallower than this one (the call), computed here from a forward walk's depths."""
    run = Run(calls_vmfb, "llvm-cpu", "twice", ["5"], interval=3)
    tt, t = run.tt, run.tt.interpreter
    depths = [len(t.frames)]
    while not t.finished:
        tt.step()
        depths.append(len(t.frames) if not t.finished else 0)
    for p in range(1, len(depths) - 1):
        d = depths[p]
        tt.goto(p)
        expect_next = max(q for q in range(p) if depths[q] <= d)
        assert tt.reverse_next().position == expect_next, p
        tt.goto(p)
        if d > 1:
            expect_finish = max(q for q in range(p) if depths[q] < d)
            assert tt.reverse_finish().position == expect_finish, p
