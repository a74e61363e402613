"""Executables with IREE's buffer-device-address dispatch ABI (``vulkan-spirv-bda-v1``) on our Vulkan device.

Samples compiled with ``--iree-vulkan-dispatch-abi=bda`` run in ``DebugRunner`` on ``create_device("vulkan")``
and in ``ReferenceRunner`` on IREE's ``vulkan`` driver: the results must be equal bit for bit. ``dynamic``
passes dispatch constants (after the 32-byte push-constant root) and ``mlp`` binds constant data at
non-zero offsets (the binding table holds buffer address + offset).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from support import (
    argument_types,
    assert_same,
    hal_dispatches,
    iree_compile,
    random_value,
    run_reference,
)

from engine.compiler.targets import TARGETS
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vmfb.module import open_vmfb
from engine.runtime.vmfb.vke1 import DISPATCH_ABI_BDA_V1, read_vke1
from engine.samples import SAMPLES_DIR

_NO_VULKAN = vulkan_available()
pytestmark = [
    pytest.mark.vulkan,
    pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}"),
]

BDA_FLAG = "--iree-vulkan-dispatch-abi=bda"


@pytest.fixture(scope="module")
def bda_vmfb(tmp_path_factory):
    out = tmp_path_factory.mktemp("bda")
    cache = {}

    def path(sample: str):
        if sample not in cache:
            vmfb = out / f"{sample}_bda.vmfb"
            cmd = [
                str(SAMPLES_DIR / f"{sample}.mlir"),
                *TARGETS["vulkan-spirv"].flags,
                BDA_FLAG,
                "-o",
                str(vmfb),
            ]
            proc = iree_compile(cmd, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
            cache[sample] = vmfb
        return cache[sample]

    return path


@pytest.mark.parametrize("sample", ["mlp", "dynamic"])
def test_bda_debug_run_equals_reference(sample, bda_vmfb):
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.hal.vulkan_hal_device import VulkanHalDevice

    path = bda_vmfb(sample)
    module = open_vmfb(path)
    # The flag really produced BDA pipelines (else this test would only repeat the descriptor-set one).
    assert module.executables
    for exe in module.executables:
        assert exe.format == "vulkan-spirv-bda-v1"
        assert all(p.dispatch_abi == DISPATCH_ABI_BDA_V1 for p in read_vke1(exe.data).pipelines)

    debug = DebugRunner(path, "vulkan")
    assert isinstance(debug.device, VulkanHalDevice)
    assert debug.device.supports_format("vulkan-spirv-bda-v1")
    reference = ReferenceRunner(path, "vulkan")
    rng = np.random.default_rng(zlib.crc32(sample.encode()) + 7)
    exports = [e for e in module.exports if not e.name.startswith("__")]
    for export in exports:
        types = argument_types(export.signature.attrs["iree.abi.declaration"])
        for call in range(2):
            args = [random_value(t, rng) for t in types]
            expected = reference.invoke(export.name, args)
            got = debug.invoke(export.name, args)
            assert len(got) == len(expected)
            for k, (g, e) in enumerate(zip(got, expected)):
                assert_same(g, e, f"{sample} (bda) @{export.name} call {call} result {k}")
    assert debug.device.dispatch_count > 0


def test_bda_binding_offsets_reach_the_shader(bda_vmfb, tmp_path):
    """One BDA dispatch on ``VulkanDevice`` with every binding at a non-zero offset of a larger buffer: the
    binding table must hold buffer address + offset. Equal to IREE's runtime, and bytes outside the
    result range stay untouched."""

    from engine.runtime.hal.vulkan import VulkanDevice

    path = bda_vmfb("elementwise")
    (exe,) = [bytes(e.data) for e in open_vmfb(path).executables]
    definition = read_vke1(exe)
    (entry,) = definition.entry_points
    count = hal_dispatches("elementwise", tmp_path)[entry]  # the same workgroups as the descriptor ABI
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    expected = run_reference(path, "main", [a, b])

    pad, sentinel = 256, 0xA5
    with VulkanDevice() as dev:
        pipeline = dev.load_executable(exe).pipeline(entry)
        assert pipeline.binding_count == 3
        ranges = []
        for x in (a, b, np.zeros_like(a)):
            buf = dev.allocate(pad + x.nbytes + pad)
            dev.fill(buf, 0, None, sentinel, pattern_length=1)
            dev.write(buf, pad, x)
            ranges.append((buf, pad, x.nbytes))
        cb = dev.create_command_buffer()
        cb.begin()
        cb.dispatch(pipeline, count, (), ranges)
        cb.end()
        dev.submit(cb).wait()
        out = dev.read(ranges[2][0])
    got = out[pad : pad + a.nbytes].view(np.float32).reshape(4, 8)
    assert np.array_equal(got.view(np.uint32), np.ascontiguousarray(expected).view(np.uint32))
    assert (out[:pad] == sentinel).all() and (out[pad + a.nbytes :] == sentinel).all()
