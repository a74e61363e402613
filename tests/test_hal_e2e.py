"""End to end: sample programs run by our VM with the emulated HAL equal IREE's runtime bit for bit.

Every exported function of every sample compiled for llvm-cpu, vmvx and vulkan-spirv gets random inputs
shaped from its ``iree.abi.declaration``; outputs are compared byte for byte with ``iree.runtime``. Functions
are called twice (programs with mutable globals must stay equal). Programs compiled for vulkan-spirv run on
the Vulkan device and are compared with IREE's runtime on the same Vulkan device (lavapipe is not a numeric
oracle, so never with numpy). A bad input shape must fail in both engines with the same status and IREE's
own message text.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import argument_types, random_value

from engine.runtime.function_io import Scalar, Tensor
from engine.runtime.hal.convert import buffer_view_from_tensor, tensor_from_buffer_view
from engine.runtime.hal.cpu_device import CpuDevice
from engine.runtime.hal.module import HalModule
from engine.runtime.reference import ReferenceRunError, ReferenceRunner
from engine.runtime.vm.context import VmContext
from engine.runtime.vm.native import VmStatusError
from engine.runtime.vmfb.module import open_vmfb

CPU_TARGETS = ("llvm-cpu", "vmvx")
ALL_TARGETS = (*CPU_TARGETS, "vulkan-spirv")


def _pairs():
    from engine.samples import KNOWN_COMPILE_FAILURES, sample_names

    return [(s, t) for s in sample_names() for t in ALL_TARGETS if (s, t) not in KNOWN_COMPILE_FAILURES]


def _device_for(target: str):
    """Our device for a target, and the IREE device the reference runs on."""
    if target != "vulkan-spirv":
        return CpuDevice(), "local-sync"
    from engine.runtime.hal.vulkan.loader import vulkan_available

    reason = vulkan_available()
    if reason is not None:
        pytest.skip(f"no Vulkan: {reason}")
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    return VulkanHalDevice(), "vulkan"


def _debug_args(device, args: list) -> list:
    return [buffer_view_from_tensor(device, a) if isinstance(a, Tensor) else a.value for a in args]


def _same(debug, reference) -> bool:
    if isinstance(reference, Tensor):
        got = tensor_from_buffer_view(debug)
        return (
            got.element_type == reference.element_type
            and got.shape == reference.shape
            and got.array.tobytes() == np.ascontiguousarray(reference.array).tobytes()
        )
    if isinstance(reference, Scalar):
        if reference.kind in ("f32", "f64"):
            return np.array(debug, np.float64).tobytes() == np.array(reference.value, np.float64).tobytes()
        bits = 32 if reference.kind == "i32" else 64
        return (int(debug) - int(reference.value)) % (1 << bits) == 0
    return debug is None


@pytest.mark.parametrize("sample,target", _pairs(), ids=[f"{s}-{t}" for s, t in _pairs()])
def test_debug_run_equals_reference(sample, target, compiled):
    path = compiled.path(sample, target)
    module = open_vmfb(path, writable=True)
    device, reference_device = _device_for(target)
    context = VmContext([HalModule(device), module])
    reference = ReferenceRunner(path, reference_device)
    rng = np.random.default_rng(abs(hash((sample, target))) % (1 << 32))
    functions = [e for e in module.exports if not e.name.startswith("__")]
    assert functions
    for export in functions:
        types = argument_types(export.signature.attrs["iree.abi.declaration"])
        for call in range(2):  # twice: programs with mutable globals must stay equal
            args = [random_value(t, rng) for t in types]
            expected = reference.invoke(export.name, args)
            got = context.invoke(export.name, _debug_args(device, args))
            assert len(got) == len(expected)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert _same(g, e), f"{export.name} call {call} result {k}: debug {g!r} != reference {e!r}"


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_bad_input_shape_fails_like_iree(target, compiled):
    path = compiled.path("elementwise", target)
    device = CpuDevice()
    context = VmContext([HalModule(device), open_vmfb(path, writable=True)])
    reference = ReferenceRunner(path, "local-sync")
    rng = np.random.default_rng(7)
    cases = [
        (rng.standard_normal((4, 9)).astype(np.float32), "shape dimension"),
        (rng.standard_normal((32,)).astype(np.float32), "shape rank"),
        (rng.integers(0, 9, (4, 8)).astype(np.int32), "element type"),
    ]
    good = Tensor.from_numpy(rng.standard_normal((4, 8)).astype(np.float32))
    for bad, what in cases:
        args = [Tensor.from_numpy(bad), good]
        with pytest.raises(ReferenceRunError) as ref_error:
            reference.invoke("main", args)
        with pytest.raises(VmStatusError) as our_error:
            context.invoke("main", _debug_args(device, args))
        iree_text = str(ref_error.value)
        assert ref_error.value.status == our_error.value.code.name == "INVALID_ARGUMENT"
        found = re.search(r"INVALID_ARGUMENT; (.*?); while invoking native function", iree_text)
        assert found, iree_text
        assert what in found.group(1)
        assert found.group(1) in str(our_error.value), (found.group(1), str(our_error.value))
