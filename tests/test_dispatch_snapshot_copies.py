"""One dispatch-snapshot observer: with the gate, capture, the divergence finder's side and time travel's
dispatch memo all watching one run, each binding's bytes are copied once before and once after a dispatch.

Copies are counted where they happen: ``numpy.array`` is wrapped for the run, and a call whose argument is
exactly a binding's bytes of the dispatch running (same memory, same length) and whose result is new
memory is a copy of that binding. Observers first and last on the device, and the kernel hook, say when a
dispatch's "before" and "after" moments begin and end.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from support import iree_compile

from engine.compiler.targets import target_flags
from engine.dispatch.debug_capture import DispatchRecorder
from engine.dispatch.lockstep import DefinedBytes, _SideObserver
from engine.dispatch.snapshot import DispatchSnapshots
from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs, split_cconv
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.samples import sample_path
from engine.session.dispatch_gate import DispatchGate
from engine.session.protocol import Breakpoint, BreakpointKind
from engine.timetravel.dispatch_memo import DispatchMemo


class _Moments(DispatchObserver):
    """Says which dispatch runs and which moment it is in (first and last observer, and the kernel hook)."""

    def __init__(self, memo: DispatchMemo):
        self.memo = memo
        self.record: DispatchRecord | None = None
        self.moment = "idle"
        self.copies: Counter = Counter()  # (sequence, moment, binding index) -> copies
        self.records: list[DispatchRecord] = []

    def before_dispatch(self, record: DispatchRecord) -> None:
        self.record, self.moment = record, "before"
        self.records.append(record)

    def kernel(self, executable, record, run) -> None:
        def run_then_after():
            run()
            self.moment = "after"

        self.memo(executable, record, run_then_after)

    def seen(self, source, result) -> None:
        record = self.record
        if record is None or self.moment == "idle" or not isinstance(source, np.ndarray):
            return
        if not isinstance(result, np.ndarray) or np.shares_memory(source, result):
            return
        where = (source.__array_interface__["data"][0], source.nbytes)
        for b in record.bindings:
            data = b.data
            if (data.__array_interface__["data"][0], data.nbytes) == where:
                self.copies[(record.sequence, self.moment, b.index)] += 1


class _Last(DispatchObserver):
    def __init__(self, moments: _Moments):
        self.moments = moments

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.moments.record, self.moments.moment = None, "idle"


class _Writer:
    """The BundleWriter surface, in memory."""

    def __init__(self):
        self.entries = []

    def write_tensor(self, stem, array, tensor_type=None):
        return stem, str(tensor_type)

    def add_dispatch(self, entry):
        self.entries.append(entry)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("copies") / "mlp.vmfb"
    proc = iree_compile(
        [str(sample_path("mlp")), *target_flags("llvm-cpu"), "-o", str(out)],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_each_binding_is_copied_once_before_and_once_after_whoever_watches(mlp, monkeypatch):
    runner = DebugRunner(str(mlp), "local-sync")
    device = runner.device
    parked = []
    gate = DispatchGate(lambda record, info, stop: parked.append(record.sequence), lambda: False, lambda r: None)
    gate.breakpoints = (Breakpoint(BreakpointKind.NAN),)  # the gate wants every dispatch's bytes before
    capture = DispatchRecorder(_Writer())
    finder = _SideObserver(None, None, DefinedBytes())  # run A's side: keeps the written bytes after
    steps = []
    finder.finished = lambda record, step: steps.append(step)
    memo = DispatchMemo(min_seconds=0.0)  # keeps every dispatch's results (time travel's copies after)
    moments = _Moments(memo)

    device.add_observer(moments, first=True)
    snapshots = DispatchSnapshots.for_device(device)
    snapshots.subscribe(gate)
    capture.attach(device)
    snapshots.subscribe(finder)
    device.add_observer(_Last(moments))
    device.kernel_hook = moments.kernel
    # The memo keys a dispatch by its allocations' serials (time travel numbers them); number them here.
    serials = iter(range(1_000_000))
    device.allocation_listeners.append(lambda allocation: setattr(allocation, "lens_serial", next(serials)))

    real_array = np.array

    def counting_array(obj, *args, **kwargs):
        result = real_array(obj, *args, **kwargs)
        moments.seen(obj, result)
        return result

    monkeypatch.setattr(np, "array", counting_array)
    args = parse_inputs(["2x16xf32=0.25"], split_cconv(runner.cconv("main"))[0])
    runner.invoke("main", args)
    monkeypatch.setattr(np, "array", real_array)

    assert moments.records and not parked
    assert len(capture.writer.entries) == len(steps) == len(moments.records)
    assert len(memo.kept) == len(moments.records)  # every dispatch's results kept by the memo too
    for record, step in zip(moments.records, steps):
        written = [i for i, info in enumerate(step.entry.bindings) if info["access"] != "read"]
        assert written, record.export_name
        for b in record.bindings:
            assert moments.copies[(record.sequence, "before", b.index)] == 1, (record.export_name, b.index)
            # Bindings the dispatch wrote are kept after it (capture, finder, memo): one copy for all three;
            # those only read may be copied by the memo (it keeps every binding), once.
            after = moments.copies[(record.sequence, "after", b.index)]
            assert after == 1 if b.index in written else after <= 1, (record.export_name, b.index, after)
        # The finder's bytes after are the capture's and the memo's: one copy, shared.
        kept = memo.kept[record.sequence].results
        for i in written:
            assert np.shares_memory(step.after[i], kept[i])
