"""The typed replay records (``engine.replay.payloads``) against IREE 3.13's own ``iree-dump-replay``: on
replays IREE's ``iree-run-module`` recorded of real programs, every value IREE prints for a payload is the
typed record's attribute of that name (read through the record, not through its JSON projection), every
field the record has IREE prints, and the parts read lazily (a dispatch's constants and bindings, a
submission's binding table and semaphores, an executable's ABI metadata) agree with IREE's counts and lists.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
from support import iree_dump_replay_rows, record_replay

from engine.errors import ReplayFormatError
from engine.replay import format as f
from engine.replay.payloads import (
    DECODERS,
    Dispatch,
    ExecutablePrepare,
    FileObject,
    QueueExecute,
    ScopePayload,
)
from engine.replay.reader import BufferRef, FileRange, Timepoint, open_replay

RUNS = {
    # (sample, target, function, inputs, device): a plain matmul, dynamic shapes (push constants) on VMVX,
    # a large constant on the task executor, two functions of one module.
    "matmul": ("matmul", "llvm-cpu", "main", ["4x8xf32=0.25", "8x16xf32=0.5"], "local-sync"),
    "dynamic": ("dynamic", "vmvx", "matmul_rows", ["3x8xf32=1", "8x4xf32=2"], "local-sync"),
    "large_constant": ("large_constant", "llvm-cpu", "main", ["16384xf32=1.5"], "local-task"),
    "multi_function": ("multi_function", "llvm-cpu", "add_then_mul", ["4xf32=1 2 3 4", "4xf32=3"], "local-sync"),
}


def _as_iree_prints(value):
    """A typed value in the shape of IREE's JSON (written here, not taken from the records' projection)."""
    if isinstance(value, FileRange):
        return {"offset": value.offset, "length": value.length, "uncompressed_length": value.length,
                "compression_type": 0, "digest_type": 0}  # fmt: skip
    if isinstance(value, BufferRef):
        return {"buffer_id": value.buffer_id, "offset": value.offset, "length": value.length,
                "buffer_slot": value.slot}  # fmt: skip
    if isinstance(value, Timepoint):
        return {"semaphore_id": value.semaphore_id, "value": value.value}
    if isinstance(value, tuple | list):
        return [_as_iree_prints(v) for v in value]
    return value


@pytest.fixture(scope="module", params=sorted(RUNS))
def replay_and_rows(request, compiled, tmp_path_factory):
    sample, target, function, inputs, device = RUNS[request.param]
    path = tmp_path_factory.mktemp("payloads") / f"{request.param}.ireereplay"
    record_replay(compiled.path(sample, target), function, inputs, path, device)
    replay = open_replay(path)
    rows = iree_dump_replay_rows(path)[2:]  # the file and summary rows first
    records = list(replay.records())
    assert len(records) == len(rows)
    yield replay, list(zip(records, rows))
    replay.close()


def test_every_value_iree_prints_is_the_typed_records_attribute(replay_and_rows):
    replay, pairs = replay_and_rows
    kinds_seen = set()
    for record, row in pairs:
        payload = replay.decode(record)
        if "payload" not in row:
            assert payload is None
            continue
        assert type(payload) is DECODERS[record.payload_type], row["payload_type"]
        kinds_seen.add(type(payload))
        theirs = row["payload"]
        for key, value in theirs.items():
            assert _as_iree_prints(getattr(payload, key)) == value, (row["sequence_ordinal"], key)
        printed = {x.name for x in fields(payload) if x.metadata.get("json", True)}
        assert printed <= set(theirs), (type(payload).__name__, printed - set(theirs))
    # The kinds a run of a real program records, each checked above.
    assert {ScopePayload, ExecutablePrepare, Dispatch, QueueExecute} <= kinds_seen


def test_lazy_parts_agree_with_iree(replay_and_rows):
    replay, pairs = replay_and_rows
    functions_named = 0
    for record, row in pairs:
        payload = replay.decode(record)
        if isinstance(payload, Dispatch):
            assert "bindings" not in vars(payload)  # read when asked, then kept
            assert len(payload.bindings) == row["payload"]["binding_count"] > 0
            assert "bindings" in vars(payload)
            assert len(payload.constants) * 4 == row["payload"]["constants_length"]
            assert payload.indirect == (payload.workgroup_count_ref != BufferRef(0, 0, 0, 0))
            assert all(x > 0 for x in payload.workgroup_count)
        elif isinstance(payload, QueueExecute):
            theirs = row["payload"]
            assert [_as_iree_prints(b) for b in payload.bindings] == theirs["bindings"]
            assert [_as_iree_prints(t) for t in payload.signal_semaphores] == theirs["signal_semaphores"]
            assert [_as_iree_prints(t) for t in payload.wait_semaphores] == theirs["wait_semaphores"]
        elif isinstance(payload, ExecutablePrepare):
            theirs = row["payload"]
            assert len(payload.format.encode()) == theirs["executable_format_length"]
            assert payload.format.startswith(("embedded-elf-", "vmvx-bytecode-fb", "system-elf-"))
            assert len(payload.constants) == theirs["constant_count"]
            functions = payload.functions
            assert len(functions) == theirs["metadata_function_count"] > 0
            assert sum(len(fn.parameters) for fn in functions) == theirs["metadata_parameter_count"]
            names = sum(len(fn.name.encode()) for fn in functions)
            assert names == theirs["metadata_function_name_storage_length"]
            functions_named += len(functions)
    assert functions_named > 0


def test_decode_as_names_the_payload_a_record_does_not_have(replay_and_rows):
    replay, pairs = replay_and_rows
    record = next(r for r, row in pairs if row.get("payload_type") == "dispatch")
    assert replay.decode_as(record, Dispatch).function_ordinal >= 0
    with pytest.raises(ReplayFormatError, match="has a dispatch payload; expected file_object"):
        replay.decode_as(record, FileObject)
    assert f.PayloadType.DISPATCH == Dispatch.PAYLOAD_TYPE
