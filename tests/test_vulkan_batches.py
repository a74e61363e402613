"""Vulkan batches between watched dispatches (issue 29): Device.execute plans, VulkanHalDevice.run_batch records
each unwatched stretch into one VkCommandBuffer. Batched, partly watched and fully stepped runs of a real model
on lavapipe give IREE's runtime's bytes; a dispatch one observer watches runs alone, exactly there, and the
others reach it as dispatch_batch records in order; watching costs submissions only where it watches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import compile_for

from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import Tensor
from engine.runtime.hal.device import DispatchObserver
from engine.runtime.reference import ReferenceRunner

MODELS = Path(__file__).resolve().parent.parent.parent / "shared" / "models"


@pytest.fixture(scope="module")
def small_cnn_vulkan(tmp_path_factory):
    from engine.runtime.hal.vulkan.loader import vulkan_available

    reason = vulkan_available()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not checked out)")
    out = compile_for(source, tmp_path_factory.mktemp("vk") / "small_cnn.vmfb", "vulkan-spirv")
    x = Tensor.from_numpy(np.load(MODELS / "small_cnn_x.npy"))
    expected = ReferenceRunner(str(out), "vulkan").invoke("small_cnn", [x])[0].array
    return out, x, expected


class Watcher(DispatchObserver):
    """Watches the dispatches whose sequence is in ``wanted`` (all when None); notes what it is told."""

    def __init__(self, wanted: set[int] | None):
        self.wanted = wanted
        self.alone: list[tuple[str, int]] = []
        self.batched: list[list[int]] = []

    def watches(self, sequence, executable, ordinal) -> bool:
        return self.wanted is None or sequence in self.wanted

    def before_dispatch(self, record) -> None:
        self.alone.append(("before", record.sequence))

    def after_dispatch(self, record) -> None:
        self.alone.append(("after", record.sequence))

    def dispatch_batch(self, records, start_ns, end_ns) -> None:
        self.batched.append([r.sequence for r in records])


def _run(vmfb, x, watcher: Watcher | None):
    runner = DebugRunner(vmfb, "vulkan")
    if watcher is not None:
        runner.device.add_observer(watcher)
    vulkan = runner.device.vulkan
    before = vulkan.submission_count
    out = runner.invoke("small_cnn", [x])[0].array
    return out, vulkan.submission_count - before, runner.device.dispatch_count


def test_batched_watched_and_stepped_runs_equal_iree(small_cnn_vulkan):
    vmfb, x, expected = small_cnn_vulkan
    batched, batched_submits, count = _run(vmfb, x, None)
    assert count >= 5
    stepper = Watcher(None)
    stepped, stepped_submits, _ = _run(vmfb, x, stepper)
    middle = count // 2
    watcher = Watcher({middle})
    watched, watched_submits, _ = _run(vmfb, x, watcher)
    assert batched.tobytes() == expected.tobytes()
    assert stepped.tobytes() == expected.tobytes()
    assert watched.tobytes() == expected.tobytes()
    # Stepping runs every dispatch alone; watching one splits its batch around it and costs at most the
    # submissions before and after it.
    assert [s for phase, s in stepper.alone if phase == "before"] == list(range(count))
    assert stepped_submits >= count
    assert batched_submits < stepped_submits
    assert watched_submits <= batched_submits + 2
    # The watched dispatch alone, exactly there; every other one in a batch record, in order.
    assert watcher.alone == [("before", middle), ("after", middle)]
    told = [s for batch in watcher.batched for s in batch]
    assert told == [s for s in range(count) if s != middle]


def test_device_memory_of_finished_calls_is_given_back(small_cnn_vulkan):
    """The device buffers mirroring a call's transient allocations go when the allocations do: calling again
    and again holds no more device buffers than one call (they leaked before: collected, never destroyed)."""
    import gc

    vmfb, x, expected = small_cnn_vulkan
    runner = DebugRunner(vmfb, "vulkan")
    vulkan = runner.device.vulkan
    live = []
    for _ in range(5):
        assert runner.invoke("small_cnn", [x])[0].array.tobytes() == expected.tobytes()
        gc.collect()
        live.append(vulkan.buffers_created - vulkan.buffers_destroyed)
    assert vulkan.buffers_created >= 10  # each call mirrors its transients anew
    assert live[-1] == live[0]
