"""Which binding a dispatch wrote through is said only where the bytes tell it. IREE binds one transient
buffer twice in a dispatch (small_cnn's convolutions read and write two parts of one slab through two
bindings of its whole range); a write through one then changes the bytes of both. Untyped, such a binding
is of access unknown, never "write" or an output by guess. Checked against IREE's own dump of the
executables' sources: no binding they declare read-only is reported written, and a binding reported
written is one they declare written."""

from __future__ import annotations

import numpy as np
from support import SHARED_MODELS, model_cpu_build

from engine.dispatch.snapshot import DispatchSnapshots, SnapshotSubscriber
from engine.dispatch.typed_tensors import Provenance, Role, read_sources
from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs, split_cconv


class _Watch(SnapshotSubscriber):
    """Every dispatch's access as the bytes tell it, and the tensors reports show (untyped: no sources)."""

    def __init__(self):
        self.seen = []

    def wants_before(self, record) -> bool:
        return True

    def after(self, snapshot) -> None:
        self.seen.append((snapshot.record.export_name, snapshot.observed_access(), snapshot.attributed_access(),
                          snapshot.ambiguous_writers(), snapshot.shown_tensors()))  # fmt: skip


def test_a_binding_aliasing_another_is_never_called_written_by_guess(tmp_path):
    build = model_cpu_build("small_cnn", tmp_path / "small_cnn.vmfb")
    declared = read_sources([build.sources]).interfaces
    runner = DebugRunner(str(build.module), "local-sync")
    watch = _Watch()
    DispatchSnapshots.for_device(runner.device).subscribe(watch)
    x = np.load(SHARED_MODELS / "small_cnn_x.npy")
    np.save(tmp_path / "x.npy", x)
    runner.invoke("small_cnn", parse_inputs([f"@{tmp_path / 'x.npy'}"], split_cconv(runner.cconv("small_cnn"))[0]))

    assert len(watch.seen) == 6
    ambiguous_seen = 0
    for export, observed, attributed, ambiguous, shown in watch.seen:
        bindings = declared[export]
        for k, access in enumerate(attributed):
            if access in ("write", "readwrite"):  # said written: the sources declare it written
                assert not bindings[k].read_only, (export, k, access)
            if bindings[k].read_only and observed[k] != "read":  # the old guess: called written
                assert access == "unknown" and k in ambiguous, (export, k)
        for t in shown:  # untyped: an ambiguous writer is one binding of unknown access, not an output
            assert t.provenance == Provenance.UNTYPED
            if t.binding in ambiguous:
                assert t.role == Role.BINDING and t.access == "unknown" and "not known" in t.note
                assert t.binding_label == f"binding {t.binding}, access unknown"
        ambiguous_seen += len(ambiguous)
    assert ambiguous_seen  # small_cnn has such dispatches (its convolutions over one slab)


def test_whole_buffer_bindings_are_located_to_the_end_of_their_buffer():
    """A binding of a whole-buffer length (``-1``, as the VM passes it) covers its buffer's bytes from its
    offset to its end: the ranges that decide in-place writes and byte types see the real span, not an
    empty or negative one."""
    from engine.dispatch.diverge_condition import ByteTypes
    from engine.dispatch.snapshot import WrittenRanges
    from engine.runtime.hal import constants as c
    from engine.runtime.hal.buffers import Allocation, HalBuffer, allocation_span
    from engine.runtime.hal.device import DispatchBinding

    allocation = Allocation(np.zeros(256, np.uint8))
    slab = HalBuffer(allocation, 0, 256, 0, 0)
    part = slab.subspan(64, 128)  # bytes [64, 192) of the allocation
    assert allocation_span(part, 16, c.WHOLE_BUFFER) == (allocation, 80, 192)
    assert allocation_span(part, 16, 32) == (allocation, 80, 112)

    class Record:  # what WrittenRanges and ByteTypes read of a dispatch: its bindings
        def __init__(self, *bindings):
            self.bindings = bindings

    ranges = WrittenRanges()
    first = Record(DispatchBinding(0, part, 100, c.WHOLE_BUFFER))  # writes [164, 192)
    assert ranges.refine(first, ["write"]) == ("write",)
    overlapping = Record(DispatchBinding(0, slab, 180, 8))  # [180, 188): inside the first write
    assert ranges.refine(overlapping, ["write"]) == ("readwrite",)
    apart = Record(DispatchBinding(0, slab, 0, 64))
    assert ranges.refine(apart, ["write"]) == ("write",)

    types = ByteTypes()
    types.mark(DispatchBinding(0, part, 64, c.WHOLE_BUFFER), 0, 64, np.dtype(np.float32))  # [128, 192)
    assert types.read_by(Record(DispatchBinding(0, slab, 150, c.WHOLE_BUFFER))) == np.float32
    assert types.read_by(Record(DispatchBinding(0, slab, 0, 100))) == np.uint8
