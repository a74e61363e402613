"""Regressions found by running IREE's own e2e suite (tests/e2e) through ``iree-lens run``.

IREE's suite cannot live in this repository, so each bug it revealed is pinned here by a small program of
ours under ``tests/e2e_programs/`` whose exported functions check their own results (``check.*``). Every
function runs in its own process (a crash must fail the test, not the test session) on both engines.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import iree_tool

from engine.compiler.targets import TARGETS
from engine.runtime.vmfb.module import open_vmfb

PROGRAMS = Path(__file__).parent / "e2e_programs"
ENGINES = ("reference", "debug")

# program -> targets it is compiled for
REGRESSIONS = {
    # Kernels writing in place into buffers imported from the module's constant data: both engines must
    # load the module into writable memory (the reference runner once used a read-only mmap and crashed).
    "in_place_on_constant": ("vmvx", "llvm-cpu"),
}


@pytest.fixture(scope="module")
def compiled_programs(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e_regressions")
    cache = {}

    def path(program: str, target: str) -> Path:
        if (program, target) not in cache:
            vmfb = out / f"{program}-{target}.vmfb"
            cmd = [iree_tool("iree-compile"), str(PROGRAMS / f"{program}.mlir"), *TARGETS[target].flags]
            done = subprocess.run([*cmd, "-o", str(vmfb)], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            cache[program, target] = vmfb
        return cache[program, target]

    return path


def run_all_functions(
    vmfb: Path, engine: str, device: str = "local-sync"
) -> dict[str, subprocess.CompletedProcess]:
    module = open_vmfb(vmfb)
    names = [e.name for e in module.exports if not e.name.startswith("__")]
    module.close()
    results = {}
    for name in names:
        cmd = [
            sys.executable,
            "-m",
            "app.launcher",
            "run",
            str(vmfb),
            f"--function={name}",
            f"--engine={engine}",
        ]
        results[name] = subprocess.run(
            [*cmd, f"--device={device}"], capture_output=True, text=True, timeout=300
        )
    return results


CASES = [(p, t, e) for p, targets in REGRESSIONS.items() for t in targets for e in ENGINES]


@pytest.mark.parametrize("program,target,engine", CASES, ids=["-".join(c) for c in CASES])
def test_regression_program_passes(compiled_programs, program, target, engine):
    vmfb = compiled_programs(program, target)
    before = hashlib.sha256(vmfb.read_bytes()).hexdigest()
    for name, done in run_all_functions(vmfb, engine).items():
        assert done.returncode == 0, (
            f"{name} on {engine}/{target}: exit {done.returncode}\n{done.stderr[-2000:]}"
        )
    # Writes into constants stay in the process: the file on disk is untouched.
    assert hashlib.sha256(vmfb.read_bytes()).hexdigest() == before
