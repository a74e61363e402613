"""Zones on Vulkan keep command buffers batched: the ZoneRecorder only needs timing (``reads_bindings =
False``), so the HAL device runs each command buffer as one submission and hands it the batch; an observer
that reads bindings still gets every dispatch alone. Executable ids are IREE's creation order."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import MODELS, iree_compile, iree_dispatches, iree_tool

from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs, split_cconv
from engine.runtime.hal.device import DispatchObserver
from engine.trace.recorder import ZoneRecorder


@pytest.fixture(scope="module")
def attention_vulkan(tmp_path_factory):
    src = MODELS / "attention_block.mlir"
    if not src.exists():
        pytest.skip("shared models are absent")
    out = tmp_path_factory.mktemp("attention") / "attention_vulkan.vmfb"
    iree_compile(
        [str(src), "--iree-hal-target-device=vulkan", "-o", str(out)],
        check=True,
        )
    return out, f"@{MODELS / 'attention_block_x.npy'}"


class _Reader(DispatchObserver):  # the default: may read bindings, so every dispatch runs alone
    def __init__(self) -> None:
        self.seen = 0

    def after_dispatch(self, record) -> None:
        self.seen += 1


def _record(vmfb: Path, x: str, extra: DispatchObserver | None = None):
    runner = DebugRunner(vmfb, "vulkan")
    values = parse_inputs([x], split_cconv(runner.cconv("attention_block"))[0])
    rec = ZoneRecorder()
    rec.attach(runner.context.interpreter, runner.device)
    if extra is not None:
        runner.device.observers.append(extra)
    runner.invoke("attention_block", values)
    rec.detach(runner.context.interpreter, runner.device)
    return rec.trace()


def _dispatch_zones(trace):
    cid = trace.categories.id_of("dispatch")
    idx = np.flatnonzero(trace.zones.category == cid)
    return sorted((trace.zone(int(i)) for i in idx), key=lambda z: z.args["ordinal"])


def test_recorder_keeps_vulkan_batching_and_matches_iree(attention_vulkan, tmp_path):
    vmfb, x = attention_vulkan
    trace = _record(vmfb, x)
    zones = _dispatch_zones(trace)
    expected = iree_dispatches(vmfb, "attention_block", [x], "vulkan", tmp_path)
    assert [(z.name, tuple(z.args["workgroup_count"])) for z in zones] == expected
    # Every dispatch came from a batched submission, and its zone lies inside a command-buffer zone.
    assert all(z.args.get("timing") == "batch share" for z in zones)
    assert all(z.args["batch_dispatches"] >= 1 for z in zones)
    z = trace.zones
    queue = np.flatnonzero(z.category == trace.categories.id_of("queue"))
    for d in zones:
        assert np.any((z.start[queue] <= d.start_ns) & (z.end[queue] >= d.end_ns))
    # The dispatches of one batch share its time in order: none overlaps the one before it.
    starts = [d.start_ns for d in zones]
    ends = [d.end_ns for d in zones]
    assert all(s >= e for s, e in zip(starts[1:], ends[:-1]))
    assert all(d.end_ns >= d.start_ns for d in zones)


def test_an_observer_reading_bindings_turns_batching_off(attention_vulkan):
    vmfb, x = attention_vulkan
    reader = _Reader()
    zones = _dispatch_zones(_record(vmfb, x, reader))
    assert reader.seen == len(zones) > 0
    assert not any("timing" in z.args for z in zones)


def test_executable_ids_are_iree_creation_order(attention_vulkan, tmp_path):
    """The ``executable`` arg of a debug-run dispatch is the id IREE's profiler gives the same export."""
    import json

    vmfb, x = attention_vulkan
    prof = tmp_path / "p.ireeprof"
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", "--device=vulkan", "--function=attention_block"]
    cmd += [f"--input={x}", "--device_profiling_mode=dispatch-events,executable-metadata"]
    cmd += [f"--device_profiling_output={prof}"]
    subprocess.run(cmd, check=True, capture_output=True)
    out = subprocess.run(
        [iree_tool("iree-profile"), "export", "--format=ireeperf-jsonl", str(prof)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    iree_ids = {r["key"]: r["executable_id"] for r in rows if r["record_type"] == "dispatch_event"}
    ours = {z.name: z.args["executable"] for z in _dispatch_zones(_record(vmfb, x))}
    assert iree_ids and ours == iree_ids
