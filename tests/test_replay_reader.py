"""The ``.ireereplay`` reader: our listing equals ``iree-dump-replay --format=jsonl`` on replays recorded
by IREE's ``iree-run-module`` (samples on local-sync/local-task/Vulkan, the shared ONNX models), and a
damaged replay ends in ``ReplayFormatError``."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest
from support import iree_compile, iree_dump_replay_rows, iree_tool, lens_in_process, record_replay

from engine.compiler.targets import target_flags
from engine.errors import ReplayFormatError
from engine.replay.model import describe_replay
from engine.replay.projection import jsonl_rows
from engine.replay.reader import ReplayFile, open_replay

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

SAMPLE_RUNS = {
    "matmul-llvm-cpu": ("matmul", "llvm-cpu", "main", ["4x8xf32=0.25", "8x16xf32=0.5"], "local-sync"),
    "dynamic-vmvx": ("dynamic", "vmvx", "matmul_rows", ["3x8xf32=1", "8x4xf32=2"], "local-sync"),
    "large_constant-task": ("large_constant", "llvm-cpu", "main", ["16384xf32=1.5"], "local-task"),
    "multi_function-llvm-cpu": (
        "multi_function",
        "llvm-cpu",
        "add_then_mul",
        ["4xf32=1 2 3 4", "4xf32=3"],
        "local-sync",
    ),
}


@pytest.fixture(scope="module")
def replays(compiled, tmp_path_factory):
    root = tmp_path_factory.mktemp("replays")
    out = {}
    for key, (sample, target, function, inputs, device) in SAMPLE_RUNS.items():
        out[key] = record_replay(
            compiled.path(sample, target), function, inputs, root / f"{key}.ireereplay", device
        )
    return out


def _model_replay(name: str, root: Path) -> Path:
    source = MODELS / f"{name}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    vmfb = root / f"{name}.vmfb"
    proc = iree_compile(
        [str(source), *target_flags("llvm-cpu"), "-o", str(vmfb)],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return record_replay(vmfb, name, [f"@{MODELS / f'{name}_x.npy'}"], root / f"{name}.ireereplay")


def _assert_listing_equals_iree(path: Path) -> list[dict]:
    ours = list(jsonl_rows(open_replay(path)))
    theirs = iree_dump_replay_rows(path)
    assert len(ours) == len(theirs) > 2
    for a, b in zip(ours, theirs):
        assert a == b, (a, b)
    return theirs


@pytest.mark.parametrize("key", sorted(SAMPLE_RUNS))
def test_listing_equals_iree_dump_replay(replays, key):
    rows = _assert_listing_equals_iree(replays[key])
    assert any(r.get("operation") == "command_buffer.dispatch" for r in rows)


@pytest.mark.parametrize("model", ["small_cnn", "attention_block"])
def test_model_listing_equals_iree_dump_replay_and_names_its_dispatches(model, tmp_path):
    path = _model_replay(model, tmp_path)
    rows = _assert_listing_equals_iree(path)
    described = describe_replay(open_replay(path))
    # The dispatches the queue ran: one per recorded dispatch of each executed command buffer, named by
    # the executable's ABI metadata (IREE's export names).
    dispatch_records = [r for r in rows if r.get("operation") == "command_buffer.dispatch"]
    assert len(described.dispatches) == len(dispatch_records) > 0
    assert all(d.name.startswith(f"{model}$async_dispatch_") for d in described.dispatches)
    assert [d.record for d in described.dispatches] == [r["sequence_ordinal"] for r in dispatch_records]


@pytest.mark.vulkan
def test_vulkan_replay_listing_equals_iree_dump_replay(compiled, tmp_path):
    path = record_replay(
        compiled.path("softmax", "vulkan-spirv"), "main", ["4x16xf32=1"], tmp_path / "s.ireereplay", "vulkan"
    )
    _assert_listing_equals_iree(path)
    (x,) = describe_replay(open_replay(path)).executables
    assert x.format.startswith("vulkan-spirv") and x.functions


def test_inspect_command_lists_dispatches_and_json_records(replays):
    path = replays["multi_function-llvm-cpu"]
    proc = lens_in_process(*["inspect", str(path), "--output=json"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["records"] == iree_dump_replay_rows(path)[2:]
    assert [d["name"] for d in doc["dispatches"]] == [
        d.name for d in describe_replay(open_replay(path)).dispatches
    ]
    # The module's initializer records a command buffer per function; only add_then_mul's ran.
    recorded = {
        r["sequence_ordinal"] for r in doc["records"] if r.get("operation") == "command_buffer.dispatch"
    }
    assert 0 < len(doc["dispatches"]) < len(recorded)
    assert {d["record"] for d in doc["dispatches"]} <= recorded
    n = len(doc["dispatches"])
    text = lens_in_process(*["inspect", str(path)])
    assert text.returncode == 0 and f"dispatches: {n}" in text.stdout


def _damaged(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value) :]


def test_damaged_replays_end_in_replay_format_errors(replays, tmp_path):
    data = replays["matmul-llvm-cpu"].read_bytes()
    first_record = struct.unpack_from("<I", data, 8)[0]
    cases = {
        "empty": b"",
        "truncated header": data[:10],
        "bad magic": _damaged(data, 0, b"XXXX"),
        "version 3": _damaged(data, 4, struct.pack("<H", 3)),
        "truncated file": data[: len(data) // 2],
        "record past the end": _damaged(data, first_record, struct.pack("<Q", 1 << 40)),
        "bad ordinal": _damaged(data, first_record + 16, struct.pack("<Q", 7)),
        "reserved field": _damaged(data, first_record + 80, struct.pack("<I", 1)),
    }
    for what, bad in cases.items():
        with pytest.raises(ReplayFormatError):
            list(jsonl_rows(ReplayFile.from_bytes(bad, name=what)))
    # IREE's dumper rejects the same files (it is the oracle for what is damaged).
    for what in ("bad magic", "truncated file", "bad ordinal"):
        p = tmp_path / "bad.ireereplay"
        p.write_bytes(cases[what])
        assert subprocess.run([iree_tool("iree-dump-replay"), str(p)], capture_output=True).returncode != 0
    with pytest.raises(ReplayFormatError):
        open_replay(tmp_path / "missing.ireereplay")
