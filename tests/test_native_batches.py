"""Native batches between possible stops (issue 29): the device plans each command buffer from the observers'
``watches`` answers, runs the unwatched stretches as batches and the watched dispatches alone.

Programs: a chain of matmuls (one dispatch each, all in one command buffer), compiled with the real
iree-compile; SqueezeNet from ``../shared/models`` (slow). Results are compared bit for bit with IREE's
runtime and between a batched run and a run where every dispatch is watched (stepped).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from support import model_cpu_build, patched_kernel_copy
from support.session import Events, compile_program

from engine.dispatch.snapshot import DispatchSnapshots
from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import Tensor
from engine.runtime.hal.device import DispatchObserver, QueueListener
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vmfb.module import open_vmfb
from engine.session.child import ChildSession
from engine.session.debug_session import DebugSession
from engine.session.dispatch_gate import DispatchGate
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    BatchNames,
    Breakpoint,
    Call,
    Continue,
    Crashed,
    Finished,
    Open,
    Opened,
    Progress,
    SetBreakpoints,
    Step,
)

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

CHAIN = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = linalg.matmul ins(%a, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = linalg.matmul ins(%b, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = linalg.matmul ins(%c, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = linalg.matmul ins(%d, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
"""

RNG = np.random.default_rng(29)
X = RNG.standard_normal((4, 8)).astype(np.float32)
W = (RNG.standard_normal((8, 8)) * 0.5).astype(np.float32)


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("native_batches")
    source = out / "chain.mlir"
    source.write_text(CHAIN)
    return compile_program(str(source), "llvm-cpu", out)


class BatchLog(DispatchObserver):
    """Watches nothing; logs the sequences of each batch it is told of."""

    def __init__(self):
        self.batches: list[list[int]] = []

    def watches(self, sequence, executable, ordinal) -> bool:
        return False

    def dispatch_batch(self, records, start_ns, end_ns) -> None:
        self.batches.append([r.sequence for r in records])


class WatchAll(DispatchObserver):
    """Watches every dispatch (so none runs in a batch): the stepped run."""

    def __init__(self):
        self.seen: list[int] = []

    def after_dispatch(self, record) -> None:
        self.seen.append(record.sequence)


def _tensors(inputs: list[np.ndarray]) -> list[Tensor]:
    return [Tensor.from_numpy(v) for v in inputs]


def _run(path: Path, function: str, inputs: list[np.ndarray], observer: DispatchObserver | None = None):
    runner = DebugRunner(str(path), "local-sync")
    if observer is not None:
        runner.device.add_observer(observer)
    return runner, [v.array for v in runner.invoke(function, _tensors(inputs))]


def _reference(path: Path, function: str, inputs: list[np.ndarray]) -> np.ndarray:
    return ReferenceRunner(str(path), "local-sync").invoke(function, _tensors(inputs))[0].array


def _gate_run(path: Path, breakpoints: tuple[Breakpoint, ...]):
    """A run watched by a dispatch gate (no session): each park records the dispatch and its inputs then."""
    runner = DebugRunner(str(path), "local-sync")
    parks: list[tuple[int, str, bytes]] = []

    def park(record, info, stop):
        parks.append((record.sequence, str(info.when), bytes(record.bindings[0].data)))

    gate = DispatchGate(park, lambda: False, lambda record: None)
    gate.breakpoints = breakpoints
    DispatchSnapshots.for_device(runner.device).subscribe(gate)
    log = BatchLog()
    runner.device.add_observer(log)
    gate.begin_call(runner.device.dispatch_count)
    outputs = [v.array for v in runner.invoke("main", _tensors([X, W]))]
    return parks, log.batches, outputs


def test_unwatched_dispatches_run_as_one_batch_and_match_iree(chain):
    log = BatchLog()
    runner, batched = _run(chain, "main", [X, W], log)
    assert batched[0].tobytes() == _reference(chain, "main", [X, W]).tobytes()
    count = runner.device.dispatch_count
    assert count >= 5  # a dispatch per matmul at least
    assert log.batches == [list(range(count))]  # one command buffer, nothing watched: one batch
    watcher = WatchAll()
    _, stepped = _run(chain, "main", [X, W], watcher)
    assert watcher.seen == list(range(count))
    assert stepped[0].tobytes() == batched[0].tobytes()


def test_a_breakpoint_inside_a_batch_stops_exactly_there(chain):
    every, _, stepped_out = _gate_run(chain, (Breakpoint("dispatch", dispatch="*"),))
    count = len(every)
    target = count - 2
    parks, batches, outputs = _gate_run(chain, (Breakpoint("dispatch", ordinal=target),))
    assert [(s, w) for s, w, _ in parks] == [(target, "before")]
    # The stretch before it ran as one batch, the one after it as another; the watched one alone.
    assert batches == [list(range(target)), list(range(target + 1, count))]
    # What the stop saw is what a run that stops at every dispatch saw there.
    assert parks[0][2] == every[target][2]
    assert outputs[0].tobytes() == stepped_out[0].tobytes()
    # An "after" breakpoint by name: the watched dispatch's bytes after it ran, the rest batched.
    after, batches, _ = _gate_run(chain, (Breakpoint("dispatch", dispatch="*", when="after", ordinal=1),))
    assert [(s, w) for s, w, _ in after] == [(1, "after")]
    assert batches == [[0], list(range(2, count))]


@pytest.fixture
def session():
    events = Events()
    s = InProcessSession(DebugSession, events)
    s.events = events
    yield s
    s.close()


def test_a_condition_armed_while_parked_takes_effect_at_the_next_dispatch(session, chain):
    session.send(Open(str(chain), "local-sync"))
    assert isinstance(session.events.next(), Opened)
    session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=1),)))
    session.send(Call("main", ("4x8xf32=0.5", "8x8xf32=0.25")))
    stop = session.events.next()
    assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == 1
    # Armed while parked in dispatch 1: a breakpoint at 2 (the very next dispatch, in the same command buffer).
    session.send(SetBreakpoints((Breakpoint("dispatch", ordinal=1), Breakpoint("dispatch", ordinal=2))))
    session.send(Continue())
    stop = session.events.next()
    assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == 2
    # A dispatch step from there stops at the next one too.
    session.send(Step("dispatch"))
    stop = session.events.next()
    assert stop.reason == "dispatch" and stop.location.dispatch_info.ordinal == 3
    session.send(SetBreakpoints(()))
    session.send(Continue())
    done = session.events.next()
    assert isinstance(done, Finished), done
    expected = np.full((4, 8), 0.5, np.float32)
    for _ in range(5):
        expected = expected @ np.full((8, 8), 0.25, np.float32)
    assert np.allclose(done.outputs[0].to_numpy(), expected)


TRANSFERS = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %h: tensor<3x5xf16>)
    -> (tensor<4x16xf32>, tensor<6x9xf16>, tensor<12x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %cat = tensor.concat dim(1) %a, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %pv = arith.constant 1.5 : f16
  %p = tensor.pad %h low[1, 2] high[2, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %pv : f16
  } : tensor<3x5xf16> to tensor<6x9xf16>
  %c0 = tensor.concat dim(0) %x, %a, %x : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<12x8xf32>
  return %cat, %p, %c0 : tensor<4x16xf32>, tensor<6x9xf16>, tensor<12x8xf32>
}
"""


def test_fills_and_copies_run_inside_the_native_batch_bit_identical(tmp_path):
    """A command buffer with a 2-byte fill (the pad's f16 1.5) and copies (the concatenations) between
    its dispatches runs as one native call; the results equal IREE's runtime's, the stepped run's and those
    of a run whose transfers go one at a time (a transfer listener must see each, so they cut the plan)."""
    source = tmp_path / "transfers.mlir"
    source.write_text(TRANSFERS)
    vmfb = compile_program(str(source), "llvm-cpu", tmp_path)
    h = RNG.standard_normal((3, 5)).astype(np.float16)
    inputs = [X, W, h]
    reference = ReferenceRunner(str(vmfb), "local-sync").invoke("main", _tensors(inputs))
    log = BatchLog()
    runner, batched = _run(vmfb, "main", inputs, log)
    assert len(log.batches) == 1  # nothing watched: the command buffer is one batch...
    assert runner.device.native_calls == 1  # ...and, transfers included, one native call
    for mine, theirs in zip(batched, reference, strict=True):
        assert mine.tobytes() == theirs.array.tobytes()
    assert batched[1][0, 0] == np.float16(1.5) and batched[1][1, 2] == h[0, 0]  # the fill ran

    listening = DebugRunner(str(vmfb), "local-sync")
    kinds: list[str] = []
    listening.device.transfer_listeners.append(lambda transfer: kinds.append(transfer.kind))
    one_at_a_time = [v.array for v in listening.invoke("main", _tensors(inputs))]
    assert "fill" in kinds and "copy" in kinds  # the program really has transfers between dispatches
    assert listening.device.native_calls > 1  # which cut the command buffer
    watcher = WatchAll()
    _, stepped = _run(vmfb, "main", inputs, watcher)
    for a, b, c in zip(batched, one_at_a_time, stepped, strict=True):
        assert a.tobytes() == b.tobytes() == c.tobytes()


def test_profile_zones_come_from_the_native_loop_one_per_dispatch(tmp_path):
    """The zone recorder watches nothing on the CPU device: the command buffer still runs as one native call,
    and each dispatch gets its own zone from the loop's clock (no "batch share"), in order, inside the
    command buffer's zone; the outputs stay IREE's."""
    from engine.trace.recorder import CAT_DISPATCH, CAT_QUEUE, ZoneRecorder

    source = tmp_path / "transfers.mlir"
    source.write_text(TRANSFERS)
    vmfb = compile_program(str(source), "llvm-cpu", tmp_path)
    inputs = [X, W, RNG.standard_normal((3, 5)).astype(np.float16)]
    runner = DebugRunner(str(vmfb), "local-sync")
    recorder = ZoneRecorder()
    recorder.attach(runner.context.interpreter, runner.device)
    before_calls, before = runner.device.native_calls, runner.device.dispatch_count
    outputs = [v.array for v in runner.invoke("main", _tensors(inputs))]
    recorder.detach(runner.context.interpreter, runner.device)
    dispatches = runner.device.dispatch_count - before
    assert dispatches >= 4
    assert runner.device.native_calls - before_calls == 1  # not split dispatch by dispatch
    zones = [row for row in recorder.rows if row[4] == CAT_DISPATCH]
    assert len(zones) == dispatches
    assert all("timing" not in recorder.payloads[row[5]] for row in zones)  # measured, not a share
    starts, ends = [z[0] for z in zones], [z[1] for z in zones]
    assert all(s <= e for s, e in zip(starts, ends))
    assert starts[1:] == ends[:-1]  # each dispatch's zone starts where the one before ended
    (queue,) = [row for row in recorder.rows if row[4] == CAT_QUEUE]
    assert queue[0] <= starts[0] and ends[-1] <= queue[1]
    reference = ReferenceRunner(str(vmfb), "local-sync").invoke("main", _tensors(inputs))
    for mine, theirs in zip(outputs, reference, strict=True):
        assert mine.tobytes() == theirs.array.tobytes()


@pytest.mark.slow
def test_squeezenet_batched_and_stepped_are_bit_identical_and_match_iree(tmp_path):
    vmfb = model_cpu_build("squeezenet1_1", tmp_path / "squeezenet1_1.vmfb").module
    x = np.load(MODELS / "squeezenet1_1_x.npy")
    log = BatchLog()
    _, batched = _run(vmfb, "main", [x], log)
    assert len(log.batches) >= 1 and sum(map(len, log.batches)) > 20
    watcher = WatchAll()
    _, stepped = _run(vmfb, "main", [x], watcher)
    assert len(watcher.seen) == sum(map(len, log.batches))
    assert batched[0].tobytes() == stepped[0].tobytes()
    assert batched[0].tobytes() == _reference(vmfb, "main", [x]).tobytes()


class QueueLog(QueueListener):
    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def before_queue(self, operation) -> None:
        self.seen.append(("before", operation.kind))

    def after_queue(self, operation) -> None:
        self.seen.append(("after", operation.kind))


def test_queue_and_executable_listeners_see_the_run_through_public_seams(chain):
    runner = DebugRunner(str(chain), "local-sync")
    queue, created = QueueLog(), []
    runner.device.queue_listeners.append(queue)
    runner.device.executable_listeners.append(lambda e, data, constants: created.append((e, bytes(data[:4]))))
    runner.invoke("main", _tensors([X, W]))
    executes = [w for w, kind in queue.seen if kind == "execute"]
    assert executes and executes == ["before", "after"] * (len(executes) // 2)
    # The module's executables were created when it loaded (before the listener): create one more.
    embedded = open_vmfb(chain).executables[0]
    data = np.frombuffer(bytes(embedded.data), np.uint8)
    executable = runner.device.create_executable(embedded.format, data, (), "rodata test")
    assert created and created[-1][0] is executable and created[-1][1] == b"\x7fELF"


def test_no_engine_module_replaces_another_objects_methods():
    """Features watch the device, the writer and the gate through listeners and seams (issue 29)."""
    engine = Path(__file__).resolve().parents[1] / "engine"
    offenders = []
    for path in engine.rglob("*.py"):
        text = path.read_text()
        if "method-assign" in text or re.search(
            r"\.(create_executable|execute|fill|copy|update|add_dispatch)\s*=\s*(?!=)", text
        ):
            offenders.append(str(path.relative_to(engine)))
    assert offenders == []


def test_a_crash_inside_a_native_batch_names_its_dispatch(tmp_path):
    """A child session runs unwatched dispatches in native batches; when a kernel in one takes the process
    down, the parent names it from the batch's Progress and the device's progress cell."""
    program = compile_program("nan_log", "llvm-cpu", tmp_path)
    bad = tmp_path / "third_faults.vmfb"
    patched_kernel_copy(program, bad, export=2)
    events = Events()
    session = ChildSession("engine.session.debug_session:DebugSession", events, progress=True)
    try:
        session.send(Open(str(bad)))
        assert isinstance(events.next(), Opened)
        session.send(Call("main", ("4x8xf32=3", "4x8xf32=1")))
        seen = []
        while not isinstance(seen[-1] if seen else None, Crashed):
            seen.append(events.next())
        progress = [e for e in seen if isinstance(e, Progress)]
        # Each dispatch ran in a batch (this program submits one command buffer per dispatch): a Progress
        # per batch naming its dispatches, none watched on its own.
        assert [(p.batch_first, len(p.batch)) for p in progress] == [(0, 1), (1, 1), (2, 1)]
        crash = seen[-1]
        assert crash.location.dispatch.startswith("main_dispatch_2") and crash.location.dispatch_index == 2
    finally:
        session.close()


def test_a_batch_names_its_dispatches_once_then_by_id(chain):
    """A session whose device keeps a progress cell (as a child session's does) sends the ~names of a batch's
    dispatches with its first Progress only; the next call's Progress for the same planned batch carries its
    id alone, and ``BatchNames`` (what a child session's parent uses) fills the names back in."""
    events = Events()
    session = InProcessSession(DebugSession, events, progress=True)
    session.handler.progress_cell = np.zeros(2, np.uint64)
    try:
        session.send(Open(str(chain), "local-sync"))
        assert isinstance(events.next(), Opened)
        calls = []
        for _ in range(2):
            session.send(Call("main", ("4x8xf32=0.5", "8x8xf32=0.25")))
            seen = [events.next()]
            while not isinstance(seen[-1], Finished):
                seen.append(events.next())
            calls.append([e for e in seen if isinstance(e, Progress) and e.batch_id])
    finally:
        session.close()
    (first,), (second,) = calls  # one command buffer, nothing watched: one batch a call
    assert len(first.batch) >= 5 and all(name.startswith("main_dispatch_") for name in first.batch)
    assert second.batch == () and second.batch_id == first.batch_id
    names = BatchNames()
    assert names.complete(first) == first
    assert names.complete(second).batch == first.batch


RETURN_ONE = bytes.fromhex("b801000000c3")  # mov eax, 1; ret: a workgroup that reports failure


def test_a_kernel_failing_inside_a_batch_fails_the_call_as_a_watched_one_does(tmp_path):
    program = compile_program("nan_log", "llvm-cpu", tmp_path)
    bad = tmp_path / "second_fails.vmfb"
    patched_kernel_copy(program, bad, RETURN_ONE, export=1)
    inputs = _tensors([np.full((4, 8), 3, np.float32), np.ones((4, 8), np.float32)])
    errors = []
    for observer in (BatchLog(), WatchAll()):  # batched, then every dispatch watched
        runner = DebugRunner(str(bad), "local-sync")
        runner.device.add_observer(observer)
        with pytest.raises(Exception) as failed:
            runner.invoke("main", inputs)
        errors.append(str(failed.value))
    batched, stepped = errors
    assert "main_dispatch_1" in batched and "workgroup" in batched
    assert batched == stepped, (batched, stepped)


def test_a_replayed_plan_rebinds_each_table_and_refuses_a_bad_one_like_iree(compiled):
    """A reusable command buffer replayed with several binding tables: each table's buffers are the ones the
    kernel reads and writes (the plan's pointers are rewritten when a table's addresses change, kept when
    they do not), and a table whose range is too short or misaligned is refused with IREE's error, the
    plan still right for the next good table."""
    from engine.runtime.hal import constants as c
    from engine.runtime.hal.cpu_device import CpuDevice
    from engine.runtime.hal.module import HalModule
    from engine.runtime.vm.native import VmStatusError
    from engine.runtime.vm.values import VmBuffer

    def vm(data: bytes) -> VmBuffer:
        return VmBuffer(np.frombuffer(data, dtype=np.uint8).copy(), False, "rodata")

    (executable,) = open_vmfb(compiled.path("elementwise", "llvm-cpu")).executables
    device = CpuDevice()
    hal = HalModule([device])
    exe = hal.executable_create(device, -1, vm(executable.format.encode()), vm(bytes(executable.data)), None)
    ordinal = hal.executable_lookup_function(exe, vm(b"main_dispatch_0_elementwise_32_f32"))
    cb = hal.command_buffer_create(device, 0, 3, -1, 2)
    bindings = [(0, 0, None, 0, 128), (0, 0, None, 128, 128), (0, 1, None, 64, 128)]
    hal.command_buffer_dispatch(cb, exe, ordinal, 1, 1, 1, 0, [], bindings)
    hal.command_buffer_finalize(cb)

    def alloc(size: int):
        return hal.allocator_allocate(hal.device_allocator(device), -1, c.MEMORY_TYPE_DEVICE_LOCAL, 0xC03, size)

    def submit(table) -> None:
        fence = hal.fence_create(device, 0)
        hal.device_queue_execute_indirect(device, -1, None, fence, cb, 0, table)
        assert hal.fence_await(-1, 0, [fence]) == 0

    def run(seed: int, inputs, out, out_offset: int = 0) -> None:
        a, b = (np.random.default_rng(seed).standard_normal(32).astype(np.float32) for _ in range(2))
        inputs.write_view(0, 256)[:] = np.concatenate([a, b]).view(np.uint8)
        submit([(inputs, 0, 256), (out, out_offset, 256)])
        got = np.array(out.read_view(out_offset + 64, 128)).view(np.float32)
        np.testing.assert_allclose(got, a * b + np.abs(a), rtol=1e-6, atol=1e-6)

    inputs, out, other_out = alloc(256), alloc(512), alloc(256)
    run(1, inputs, out)
    run(2, inputs, out)  # same addresses: the pointers are kept
    run(3, inputs, other_out)  # another output buffer
    run(4, inputs, out, out_offset=256)  # the same buffer at another offset
    for table in ([(inputs, 0, 256), (alloc(128), 0, 128)], [(inputs, 4, 252), (out, 0, 256)]):
        with pytest.raises(VmStatusError):  # too short for offset 64 + 128; a misaligned input
            submit(table)
    run(5, inputs, out)
    assert device.native_calls >= 5


def test_a_breakpoint_continued_to_call_after_call_runs_its_dispatch_from_a_kept_plan(chain):
    """The dispatch a run stops at call after call runs natively from the second call on (one more native
    call per call), stopping at the same place with the same outputs as IREE's runtime."""
    runner = DebugRunner(str(chain), "local-sync")
    parks: list[int] = []
    gate = DispatchGate(lambda record, info, stop: parks.append(record.sequence), lambda: False, lambda r: None)
    gate.breakpoints = (Breakpoint("dispatch", ordinal=4),)  # the last of the chain's five dispatches
    DispatchSnapshots.for_device(runner.device).subscribe(gate)
    expected = _reference(chain, "main", [X, W])
    native_calls = []
    for _ in range(3):
        before = runner.device.native_calls
        gate.begin_call(runner.device.dispatch_count)
        (out,) = runner.invoke("main", _tensors([X, W]))
        native_calls.append(runner.device.native_calls - before)
        assert out.array.tobytes() == expected.tobytes()
    assert parks == [4, 9, 14]
    assert native_calls == [1, 2, 2]  # the batch before it; from the second call its own plan too
