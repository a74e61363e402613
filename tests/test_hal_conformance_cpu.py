"""The shared HAL conformance suite (``hal_conformance.py``) on the CPU device, with llvm-cpu executables."""

from __future__ import annotations

import pytest
from support.hal_conformance import CASES, ConformanceTarget, DispatchCase, case_id

from engine.runtime.hal.cpu_device import CpuDevice
from engine.runtime.vmfb.module import open_vmfb


@pytest.fixture(scope="module")
def cpu_target(compiled) -> ConformanceTarget:
    module = open_vmfb(compiled.path("elementwise", "llvm-cpu"))
    (executable,) = module.executables
    case = DispatchCase(
        format=executable.format,
        data=bytes(executable.data),
        export_name="main_dispatch_0_elementwise_32_f32",
        workgroup_count=(1, 1, 1),  # what the sample's host code dispatches (a 4x8 tensor is one tile)
    )
    return ConformanceTarget("cpu", CpuDevice, lambda: case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conformance(case, cpu_target):
    case(cpu_target)
