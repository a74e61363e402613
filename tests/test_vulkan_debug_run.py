"""The debug run on Vulkan equals IREE's runtime on Vulkan, bit for bit.

Every sample IREE compiles for vulkan-spirv runs in ``DebugRunner`` (our VM, the emulated HAL with
``create_device("vulkan")``) and in ``ReferenceRunner`` on IREE's ``vulkan`` driver, with deterministic random
inputs shaped from each function's ``iree.abi.declaration``. Each function is called three times in a row, so
programs with mutable globals must stay equal. Lavapipe is not a numeric oracle (its float results may
differ from numpy's): the comparison is always with IREE on the same device.

Also: ``iree-lens run --device=vulkan`` prints the same text on both engines, and without Vulkan
(``VK_ICD_FILENAMES=/nonexistent``) ``--device=vulkan`` fails with a message naming the packages while the
CPU device keeps working.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from support import argument_types, assert_same, random_value, wait_until

from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import KNOWN_COMPILE_FAILURES, sample_names

_NO_VULKAN = vulkan_available()
needs_vulkan = pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")
pytestmark = pytest.mark.vulkan

SAMPLES = [s for s in sample_names() if (s, "vulkan-spirv") not in KNOWN_COMPILE_FAILURES]
CALLS = 3


def _threads() -> set[int]:
    return {int(t) for t in os.listdir("/proc/self/task")}


@needs_vulkan
def test_a_reference_run_on_vulkan_gives_its_device_back_with_its_runner(compiled):
    # IREE's Vulkan driver waits for its queues' completions on threads of its own, and on lavapipe (Mesa
    # waits for "any of two timeline semaphores" by polling) each of them spins at 100 % of a core for as long
    # as the device lives. The runner's device is its own and goes with it: no thread it started is left.
    path = compiled.path("mlp", "vulkan-spirv")
    [export] = [e for e in open_vmfb(path).exports if not e.name.startswith("__")]
    types = argument_types(export.signature.attrs["iree.abi.declaration"])
    args = [random_value(t, np.random.default_rng(0)) for t in types]
    before = _threads()
    runner = ReferenceRunner(path, "vulkan")
    expected = runner.invoke(export.name, args)
    started = _threads() - before
    assert started, "IREE's Vulkan device started no thread: this test no longer shows anything"
    del runner
    wait_until(lambda: not (started & _threads()), 10, "the threads of IREE's Vulkan device to end")
    # A runner that is only a temporary: its call's buffers go before the device (a crash, once).
    for _ in range(20):
        assert_same(ReferenceRunner(path, "vulkan").invoke(export.name, args), expected, "a temporary runner")


@needs_vulkan
@pytest.mark.parametrize("sample", SAMPLES)
def test_debug_run_on_vulkan_equals_reference(sample, compiled):
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    path = compiled.path(sample, "vulkan-spirv")
    debug = DebugRunner(path, "vulkan")
    assert isinstance(debug.device, VulkanHalDevice)
    reference = ReferenceRunner(path, "vulkan")
    rng = np.random.default_rng(zlib.crc32(sample.encode()))
    exports = [e for e in open_vmfb(path).exports if not e.name.startswith("__")]
    assert exports
    for export in exports:
        types = argument_types(export.signature.attrs["iree.abi.declaration"])
        for call in range(CALLS):
            args = [random_value(t, rng) for t in types]
            expected = reference.invoke(export.name, args)
            got = debug.invoke(export.name, args)
            assert len(got) == len(expected)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert_same(g, e, f"{sample} @{export.name} call {call} result {k}")
    assert debug.device.dispatch_count > 0  # the work really ran on our Vulkan device


class _ReadEverything(DispatchObserver):
    """Reads every binding before and after every dispatch (what a debugger showing tensors does)."""

    def __init__(self) -> None:
        self.dispatches = 0

    def before_dispatch(self, record: DispatchRecord) -> None:
        for b in record.bindings:
            assert len(np.array(b.data)) == b.length

    def after_dispatch(self, record: DispatchRecord) -> None:
        self.dispatches += 1
        for b in record.bindings:
            assert len(np.array(b.data)) == b.length


@needs_vulkan
@pytest.mark.parametrize("sample", [s for s in ("mlp", "globals", "softmax") if s in SAMPLES])
def test_observed_debug_run_on_vulkan_equals_reference(sample, compiled):
    """Dispatch by dispatch with every binding read back: still IREE's results, bit for bit."""
    from engine.runtime.debug_runner import DebugRunner

    path = compiled.path(sample, "vulkan-spirv")
    debug = DebugRunner(path, "vulkan")
    observer = _ReadEverything()
    debug.device.observers.append(observer)
    reference = ReferenceRunner(path, "vulkan")
    rng = np.random.default_rng(zlib.crc32(sample.encode()) + 1)
    for export in [e for e in open_vmfb(path).exports if not e.name.startswith("__")]:
        types = argument_types(export.signature.attrs["iree.abi.declaration"])
        for call in range(2):
            args = [random_value(t, rng) for t in types]
            expected = reference.invoke(export.name, args)
            got = debug.invoke(export.name, args)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert_same(g, e, f"{sample} @{export.name} call {call} result {k} (observed)")
    assert observer.dispatches > 0


_MAIN = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"


def _lens(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


@needs_vulkan
def test_cli_debug_engine_prints_what_reference_prints(compiled):
    path = str(compiled.path("elementwise", "vulkan-spirv"))
    inputs = ["--input=4x8xf32=0.5", "--input=4x8xf32=1.25"]
    out = {}
    for engine in ("debug", "reference"):
        proc = _lens("run", path, "--function=main", "--device=vulkan", f"--engine={engine}", *inputs)
        assert proc.returncode == 0, proc.stderr
        out[engine] = proc.stdout
    assert out["debug"] == out["reference"]
    assert "4x8xf32=" in out["debug"]


def test_missing_vulkan_names_packages_and_cpu_still_works(compiled):
    no_vulkan = {"VK_ICD_FILENAMES": "/nonexistent", "VK_DRIVER_FILES": "/nonexistent"}
    vk_path = str(compiled.path("elementwise", "vulkan-spirv"))
    proc = _lens("run", vk_path, "--function=main", "--device=vulkan", "--engine=debug", env=no_vulkan)
    assert proc.returncode != 0
    assert "mesa-vulkan-drivers" in proc.stderr and "libvulkan1" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr

    cpu_path = str(compiled.path("elementwise", "llvm-cpu"))
    inputs = ["--input=4x8xf32=2", "--input=4x8xf32=3"]
    proc = _lens("run", cpu_path, "--function=main", "--device=local-sync", *inputs, env=no_vulkan)
    assert proc.returncode == 0, proc.stderr

    proc = _lens("devices", env=no_vulkan)
    assert proc.returncode == 0, proc.stderr
    assert "mesa-vulkan-drivers" in proc.stdout
    assert "local-sync" in proc.stdout
