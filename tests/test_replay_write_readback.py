"""``iree-lens run MODULE --write-replay``: the host's read-back of the results is in the replay, written as
IREE's own recorder writes it when ``iree-run-module --device_replay_output=`` runs the same program.

For a program compiled here (four results: three packed in one buffer at offsets, one an input returned as
it is) and the shared attention_block model, IREE's recorder and ours record one call each:

* the read-back part (from the transfer command buffer on: staging buffers, copies, read mappings) lists
  in ``iree-dump-replay`` record for record and field for field as IREE's does (object ids renamed in order
  of appearance; semaphores aside: IREE's tool signals a fence of its own, ours a timeline);
* ``iree-lens run OUT.ireereplay --output=@...`` writes each result bit for bit as ``iree-run-module`` and
  ``iree-lens run MODULE`` wrote it;
* ``iree-run-replay`` runs the replay on local-sync and local-task, and the buffers the host read hold the
  same results (read back by ``device.queue_write`` records appended to a copy: IREE's tool prints none).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_dump_replay_rows, iree_run_replay_reading, iree_tool, lens_argv

from engine.compiler.targets import target_flags
from engine.replay.reader import open_replay
from engine.replay.trace_capture import host_reads

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

RESULTS = """
func.func @results(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%init : tensor<4x16xf32>)
      -> tensor<4x16xf32>
  %t = math.tanh %m : tensor<4x16xf32>
  %n = arith.negf %a : tensor<4x8xf32>
  return %m, %n, %t, %a : tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x8xf32>
}
"""


def _program(case: str, root: Path) -> tuple[Path, str, list[str], int]:
    """(vmfb, function, --input values, result count) of a case, compiled into ``root``."""
    if case == "results":
        source = root / "results.mlir"
        source.write_text(RESULTS)
        rng = np.random.default_rng(7)
        np.save(root / "a.npy", rng.standard_normal((4, 8)).astype(np.float32))
        np.save(root / "b.npy", rng.standard_normal((8, 16)).astype(np.float32))
        function, inputs, count = "results", [f"@{root / 'a.npy'}", f"@{root / 'b.npy'}"], 4
    else:
        source = MODELS / f"{case}.mlir"
        if not source.exists():
            pytest.skip(f"{source} is not here (the shared models)")
        function, inputs, count = case, [f"@{MODELS / f'{case}_x.npy'}"], 1
    vmfb = root / f"{case}.vmfb"
    proc = iree_compile([str(source), *target_flags("llvm-cpu"), "-o", str(vmfb)], text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return vmfb, function, inputs, count


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (argv, proc.stderr[-2000:])
    return proc


def _outputs(root: Path, stem: str, count: int) -> tuple[list[str], list[Path]]:
    paths = [root / f"{stem}_{i}.npy" for i in range(count)]
    return [f"--output=@{p}" for p in paths], paths


def _readback_part(path: Path) -> list[tuple]:
    """The records from the last transfer-only command buffer's creation on, as iree-dump-replay lists them:
    kind, operation, object type and payload (file ranges and semaphores dropped), ids renamed in order."""
    rows = iree_dump_replay_rows(path)
    starts = [
        i
        for i, r in enumerate(rows)
        if r.get("operation") == "device.create_command_buffer" and r["payload"]["command_categories"] == 1
    ]
    assert starts, f"{path.name}: no transfer command buffer (no read-back)"
    names: dict[int, int] = {}

    def name(object_id: int) -> int:
        return names.setdefault(object_id, len(names) + 1) if object_id else 0

    def payload(p: dict) -> tuple:
        out = []
        for key, value in sorted(p.items()):
            if key.endswith("_range") or key in ("wait_semaphores", "signal_semaphores"):
                continue
            if isinstance(value, dict):  # a buffer reference
                value = tuple(sorted({**value, "buffer_id": name(value["buffer_id"])}.items()))
            elif key in ("command_buffer_id", "buffer_id"):
                value = name(value)
            out.append((key, value))
        return tuple(out)

    part = []
    for r in rows[starts[-1] :]:
        if (
            r.get("operation", "").startswith("replay.scope")
            or "semaphore"
            in (
                r.get("operation", ""),
                r.get("object_type", ""),
            )
            or r.get("operation") == "device.create_semaphore"
        ):
            continue
        part.append(
            (r["kind"], r.get("operation"), r.get("object_type"), r["device_id"], name(r["object_id"]),
             name(r["related_object_id"]), r["status"], payload(r.get("payload") or {}))
        )  # fmt: skip
    return part


def _iree_run_replay_results(path: Path, device: str, tmp_path: Path) -> list[bytes]:
    """What ``iree-run-replay`` leaves in the buffers the host read (each read once, in order)."""
    ranges: list[tuple[int, int, int]] = []
    for _, buffer, offset, length in host_reads(open_replay(path)):
        if (buffer, offset, length) not in ranges:
            ranges.append((buffer, offset, length))
    return iree_run_replay_reading(path, ranges, tmp_path, device)


@pytest.mark.parametrize("case", ["results", "attention_block"])
def test_written_replay_reads_the_results_back_as_iree_records_it(case, tmp_path):
    vmfb, function, inputs, count = _program(case, tmp_path)
    call = [
        f"--module={vmfb}",
        "--device=local-sync",
        f"--function={function}",
        *(f"--input={i}" for i in inputs),
    ]
    iree_flags, iree_files = _outputs(tmp_path, "iree", count)
    theirs = tmp_path / "iree.ireereplay"
    _run([iree_tool("iree-run-module"), *call, *iree_flags, f"--device_replay_output={theirs}"])
    module_flags, module_files = _outputs(tmp_path, "module", count)
    ours = tmp_path / "ours.ireereplay"
    _run([*lens_argv(), "run", str(vmfb), *call[1:], *module_flags, f"--write-replay={ours}"])
    expected = [np.load(p).tobytes() for p in iree_files]
    assert [np.load(p).tobytes() for p in module_files] == expected

    # The read-back lists as IREE's: one transfer command buffer, a staging buffer and copy per result, then
    # each result mapped for reading and unmapped.
    part = _readback_part(ours)
    assert part == _readback_part(theirs)
    assert [r[1] for r in part].count("buffer.map_range") == count
    assert [(r[1], dict(r[7])["memory_access"]) for r in part if r[1] == "buffer.unmap_range"] == [
        ("buffer.unmap_range", 1)
    ] * count

    # iree-lens run REPLAY --output writes the results, bit for bit.
    replay_flags, replay_files = _outputs(tmp_path, "replay", count)
    _run([*lens_argv(), "run", str(ours), *replay_flags])
    assert [np.load(p).tobytes() for p in replay_files] == expected

    # iree-run-replay runs it, and leaves the results where the host read them.
    for device in ("local-sync", "local-task"):
        assert _iree_run_replay_results(ours, device, tmp_path) == expected, device
