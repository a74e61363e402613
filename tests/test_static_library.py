"""A static-library build (``--iree-llvmcpu-link-static``; IREE's samples/static_library) keeps its kernels in
the object file it writes, for a host program to link: the debug engine loads them from that object (found
where the build recorded it, or beside the module) and runs the program as the same build linked as a system
library runs in IREE's runtime; the debugger stops at its dispatches. Without the object, and on the reference
engine (IREE's Python runtime has no host to link it), the refusal says why."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import iree_run_module_stdout, iree_tool, lens_in_process

from engine.runtime.hal.static_libraries import recorded_outputs, static_object
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import sample_path

CPU = ("--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
       "--iree-llvmcpu-target-cpu=host", "--iree-llvmcpu-link-embedded=false")  # fmt: skip
INPUT = "2x16xf32=" + " ".join(f"{(k % 7) - 3:g}" for k in range(32))


def compile_in(folder: Path, out: str, *flags: str) -> Path:
    proc = subprocess.run([iree_tool("iree-compile"), str(sample_path("mlp")), *CPU, *flags, "-o", out], cwd=folder,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return folder / out


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> tuple[Path, Path]:
    """The static build (its object named relative to the folder it was built in) and the same program linked
    as a system library, which IREE's runtime runs."""
    folder = tmp_path_factory.mktemp("static")
    static = compile_in(folder, "mlp_static.vmfb", "--iree-llvmcpu-link-static",
                        "--iree-llvmcpu-static-library-output-path=mlp_static.o")  # fmt: skip
    return static, compile_in(folder, "mlp_system.vmfb")


def test_the_object_is_found_where_the_build_recorded_it_or_beside_the_module(builds, tmp_path, monkeypatch):
    static = builds[0]
    assert recorded_outputs(open_vmfb(static)) == ["mlp_static.o"]
    assert static_object(open_vmfb(static), static)[0] == static.parent / "mlp_static.o"
    monkeypatch.chdir(tmp_path)  # not the build's folder: beside the module still
    assert static_object(open_vmfb(static), static)[0] == static.parent / "mlp_static.o"
    lone = Path(shutil.copy(static, tmp_path / "lone.vmfb"))
    found, looked = static_object(open_vmfb(lone), lone)
    assert found is None and tmp_path / "mlp_static.o" in looked


def test_the_debug_engine_runs_it_as_iree_runs_the_system_library_build(builds):
    static, system = builds
    proc = lens_in_process("run", str(static), "--function=main", f"--input={INPUT}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == iree_run_module_stdout(system, "main", [INPUT])
    assert f"loaded from {static.parent / 'mlp_static.o'}" in proc.stderr


def test_the_debugger_stops_at_its_dispatches(builds, tmp_path):
    commands = tmp_path / "commands.txt"
    commands.write_text("break dispatch 1\ncontinue\ncontinue\n")
    proc = lens_in_process("debug", str(builds[0]), "--function=main", f"--input={INPUT}", f"--commands={commands}")
    assert proc.returncode == 0, proc.stderr
    assert "Stopped (dispatch) before dispatch #1" in proc.stdout and "2x4xf32=" in proc.stdout


def test_without_the_object_or_on_the_reference_engine_it_is_refused_plainly(builds, tmp_path):
    lone = shutil.copy(builds[0], tmp_path / "lone.vmfb")
    proc = lens_in_process("run", str(lone), "--function=main", f"--input={INPUT}")
    assert proc.returncode == 1 and "static-library build" in proc.stderr and "not found here" in proc.stderr
    proc = lens_in_process("run", str(builds[0]), "--engine=reference", "--function=main", f"--input={INPUT}")
    assert proc.returncode == 1 and "run it on the debug engine" in proc.stderr


def test_inspect_says_where_the_code_of_each_executable_is(builds):
    proc = lens_in_process("inspect", str(builds[0]), "--output=executables")
    assert proc.returncode == 0, proc.stderr
    assert "static library mlp_linked: its code is in the object file the build wrote" in proc.stdout


def test_its_tensors_are_typed_and_its_kernels_stepped_from_the_program_rebuilt(builds, tmp_path):
    # The rebuild is judged by the object it writes: byte for byte the build's.
    out = tmp_path / "capture"
    proc = lens_in_process("capture", str(builds[0]), "--function=main", f"--input={INPUT}", f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert {d["tensors_from"] for d in manifest["dispatches"]} == {"interface"}
    assert manifest["dispatches"][0]["input_types"][0] == "2x16xf32"
    proc = lens_in_process("kernel", str(builds[0]), "--function=main", f"--input={INPUT}", "--dispatch=0")
    assert proc.returncode == 0, proc.stderr
    assert "differ" not in proc.stderr and "statements" in proc.stdout
