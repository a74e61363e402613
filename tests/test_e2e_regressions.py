"""Regressions found by running IREE's own e2e suite (tests/e2e) through ``iree-lens run``.

IREE's suite cannot live in this repository, so each bug it revealed is pinned here by a small program of
ours under ``tests/e2e_programs/`` whose exported functions check their own results (``check.*``). Every
function runs in its own process (a crash must fail the test, not the test session) on both engines.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import iree_compile, lens_run

from engine.compiler.targets import TARGETS
from engine.runtime.vmfb.module import open_vmfb

PROGRAMS = Path(__file__).parent / "e2e_programs"
ENGINES = ("reference", "debug")

MICROKERNELS = (
    "--iree-vmvx-enable-microkernels",
    "--iree-vmvx-enable-ukernels-decompose-linalg-generic=false",
)


@dataclass(frozen=True)
class Regression:
    program: str  # tests/e2e_programs/<program>.mlir
    target: str
    extra_flags: tuple[str, ...] = ()
    device: str = "local-sync"
    debug_bug: str | None = None  # an open bug of the debug engine this program shows (strict xfail)

    @property
    def label(self) -> str:
        return f"{self.program}-{self.target}" + (
            "-" + "-".join(f.strip("-") for f in self.extra_flags[:1]) if self.extra_flags else ""
        )


REGRESSIONS = [
    # Kernels writing in place into buffers imported from the module's constant data: both engines must
    # load the module into writable memory (the reference runner once used a read-only mmap and crashed).
    Regression("in_place_on_constant", "vmvx"),
    Regression("in_place_on_constant", "llvm-cpu"),
    # VMVX executables compiled with microkernels import IREE's `vmvx` module (vmvx.add.2d.f32, vmvx.pack...);
    # 57 cases of IREE's suite (its *_microkernels / *_ukernel variants) need it.
    Regression(
        "vmvx_microkernels",
        "vmvx",
        MICROKERNELS,
    ),
    # Vulkan executables with the buffer-device-address dispatch ABI (format vulkan-spirv-bda-v1); IREE's
    # suite runs stablehlo_ops/add.mlir this way (check_vulkan-spirv-bda_vulkan).
    Regression(
        "vulkan_bda",
        "vulkan-spirv",
        ("--iree-vulkan-dispatch-abi=bda",),
        device="vulkan",
    ),
]


@pytest.fixture(scope="module")
def compiled_programs(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e_regressions")
    cache = {}

    def path(case: Regression) -> Path:
        if case.label not in cache:
            vmfb = out / f"{case.label}.vmfb"
            cmd = [
                str(PROGRAMS / f"{case.program}.mlir"),
                *TARGETS[case.target].flags,
            ]
            done = iree_compile([*cmd, *case.extra_flags, "-o", str(vmfb)], text=True)
            assert done.returncode == 0, done.stderr
            cache[case.label] = vmfb
        return cache[case.label]

    return path


def run_all_functions(
    vmfb: Path, engine: str, device: str = "local-sync"
) -> dict[str, subprocess.CompletedProcess]:
    module = open_vmfb(vmfb)
    names = [e.name for e in module.exports if not e.name.startswith("__")]
    module.close()
    results = {}
    for name in names:
        results[name] = lens_run(vmfb, name, (), engine, f"--device={device}", timeout=300)
    return results


def _marks(case: Regression, engine: str):
    marks = [pytest.mark.vulkan] if case.device == "vulkan" else []
    if engine == "debug" and case.debug_bug:
        marks.append(pytest.mark.xfail(strict=True, reason=case.debug_bug))
    return marks


CASES = [
    pytest.param(case, engine, id=f"{case.label}-{engine}", marks=_marks(case, engine))
    for case in REGRESSIONS
    for engine in ENGINES
]


@pytest.mark.parametrize("case,engine", CASES)
def test_regression_program_passes(compiled_programs, case, engine):
    vmfb = compiled_programs(case)
    before = hashlib.sha256(vmfb.read_bytes()).hexdigest()
    for name, done in run_all_functions(vmfb, engine, case.device).items():
        assert done.returncode == 0, (
            f"{name} on {engine}/{case.target}: exit {done.returncode}\n{done.stderr[-2000:]}"
        )
    # Writes into constants stay in the process: the file on disk is untouched.
    assert hashlib.sha256(vmfb.read_bytes()).hexdigest() == before
