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
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest

from engine.runtime import element_types as et
from engine.runtime.function_io import OpaqueRef, Scalar, Tensor
from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import KNOWN_COMPILE_FAILURES, sample_names

_NO_VULKAN = vulkan_available()
needs_vulkan = pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")
pytestmark = pytest.mark.vulkan

SAMPLES = [s for s in sample_names() if (s, "vulkan-spirv") not in KNOWN_COMPILE_FAILURES]
DYNAMIC_DIM = 6
SCALAR_INT = 3  # small: some samples loop that many times
CALLS = 3
_ARG = re.compile(r"%\w+:\s*(tensor<[^>]*>|[a-z]+\d+)")


def argument_types(declaration: str) -> list[str]:
    """The argument types of an ``iree.abi.declaration`` (``sync func @f(%a: tensor<4xf32>, %n: i32) -> ...``)."""
    start = declaration.index("(") + 1
    end = declaration.index(") ->") if ") ->" in declaration else declaration.rindex(")")
    return _ARG.findall(declaration[start:end])


def random_value(type_text: str, rng: np.random.Generator) -> Tensor | Scalar:
    if not type_text.startswith("tensor<"):
        element = et.parse_element_type(type_text)
        if element.is_float:
            return Scalar(
                "f32" if element.bit_count == 32 else "f64", float(np.float32(rng.standard_normal()))
            )
        return Scalar("i64" if element.bit_count == 64 else "i32", SCALAR_INT)
    *dims, element_text = type_text[len("tensor<") : -1].split("x")
    shape = tuple(DYNAMIC_DIM if d == "?" else int(d) for d in dims)
    element = et.parse_element_type(element_text)
    dtype = element.dtype
    if element.numerical_type == et.BOOLEAN:
        array = rng.integers(0, 2, shape).astype(dtype)
    elif element.is_float and dtype.kind == "f":
        array = rng.standard_normal(shape).astype(dtype)
    elif element.is_float:  # bf16 stored as raw bits: small finite values
        array = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(dtype)
    else:
        info = np.iinfo(dtype)
        array = rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)
    return Tensor(np.ascontiguousarray(array), element)


def assert_same(got, expected, where: str) -> None:
    if isinstance(expected, Tensor):
        assert isinstance(got, Tensor), f"{where}: {got!r} is not a tensor"
        assert got.element_type == expected.element_type, where
        assert got.shape == expected.shape, where
        raw_got = np.ascontiguousarray(got.array).view(np.uint8)
        raw_expected = np.ascontiguousarray(expected.array).view(np.uint8)
        assert np.array_equal(raw_got, raw_expected), f"{where}: bytes differ"
    elif isinstance(expected, Scalar):
        assert isinstance(got, Scalar), where
        assert got.kind == expected.kind, where
        if expected.kind in ("f32", "f64"):
            assert np.float64(got.value).tobytes() == np.float64(expected.value).tobytes(), where
        else:
            assert int(got.value) == int(expected.value), where
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{where}[{i}]")
    else:
        assert isinstance(got, OpaqueRef), where


@needs_vulkan
@pytest.mark.parametrize("sample", SAMPLES)
def test_debug_run_on_vulkan_equals_reference(sample, compiled):
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice
    from engine.session.debug_run import DebugRunner

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
    from engine.session.debug_run import DebugRunner

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
