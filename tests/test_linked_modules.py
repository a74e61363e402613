"""A program that calls functions of other compiled modules (``func.func private @module_a.abs``; IREE's
samples/multiple_modules) depends on them by name: both engines register them before it, from
``--module`` (as iree-run-module takes them) or, when not given, from the ``.vmfb`` beside the program whose
module has that name. The debugger steps into their functions, stops at their dispatches, and takes
``break function module_a.abs``; IREE's profiler is given them too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support import iree_run_module_stdout, lens_in_process
from support.session import PROGRAMS, compile_program

from engine.dispatch.bundle import Bundle
from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import Tensor
from engine.runtime.module_dependencies import LinkedModule, ModuleDependencyError, linked_modules
from engine.runtime.reference import ReferenceRunner

LINKED = PROGRAMS / "linked"
X = np.float32([-2, 3, -0.5, 0, 7, -1, 4, -8])
INPUT = "8xf32=" + " ".join(f"{v:g}" for v in X)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The three modules built side by side, as a build folder holds them."""
    out = tmp_path_factory.mktemp("linked")
    for name in ("module_a", "module_b", "pipeline"):
        compile_program(str(LINKED / f"{name}.mlir"), "llvm-cpu", out)
    return out


def built(folder: Path, name: str) -> Path:
    return folder / f"{name}.llvm-cpu.vmfb"


def iree_run_module(folder: Path) -> str:
    modules = [built(folder, n) for n in ("module_a", "module_b", "pipeline")]
    return iree_run_module_stdout(modules, "run", [INPUT])


def test_the_modules_it_calls_are_found_beside_it_by_module_name(folder, tmp_path):
    found = linked_modules(built(folder, "pipeline"))
    assert {(m.name, m.path, m.found_beside) for m in found} == {
        ("module_a", built(folder, "module_a"), True),
        ("module_b", built(folder, "module_b"), True),
    }
    # Given ones are taken first (under any file name), and not looked for.
    copy = shutil.copy(built(folder, "module_a"), tmp_path / "renamed_a.vmfb")
    found = linked_modules(built(folder, "pipeline"), [copy])
    assert found[0] == LinkedModule(Path(copy), "module_a", found_beside=False)
    assert {m.name for m in found[1:]} == {"module_b"}


def test_a_module_found_nowhere_is_named(folder, tmp_path):
    lone = Path(shutil.copy(built(folder, "pipeline"), tmp_path / "pipeline.vmfb"))
    with pytest.raises(ModuleDependencyError, match=r"calls functions of module 'module_[ab]'.*--module=FILE"):
        linked_modules(lone)
    proc = lens_in_process("run", str(lone), "--function=run", f"--input={INPUT}")
    assert proc.returncode == 1 and "--module=FILE" in proc.stderr


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_run_prints_what_iree_run_module_prints(folder, tmp_path, engine):
    beside = lens_in_process("run", str(built(folder, "pipeline")), f"--engine={engine}", "--function=run",
                             f"--input={INPUT}")  # fmt: skip
    assert beside.returncode == 0, beside.stderr
    assert beside.stdout == iree_run_module(folder)
    assert "linked with @module_a from" in beside.stderr  # found, not asked for: said
    # From another folder, with the modules given as iree-run-module takes them.
    lone = shutil.copy(built(folder, "pipeline"), tmp_path / "pipeline.vmfb")
    given = lens_in_process("run", str(lone), f"--engine={engine}", f"--module={built(folder, 'module_a')}",
                            f"--module={built(folder, 'module_b')}", "--function=run", f"--input={INPUT}")  # fmt: skip
    assert given.returncode == 0, given.stderr
    assert given.stdout == beside.stdout and "linked with" not in given.stderr


def test_both_runners_compute_the_pipeline(folder):
    x = [Tensor.from_numpy(X)]
    for runner in (DebugRunner(built(folder, "pipeline")), ReferenceRunner(built(folder, "pipeline"))):
        np.testing.assert_array_equal(runner.invoke("run", x)[0].array, np.abs(X) * np.abs(X))


def test_the_debugger_stops_in_the_modules_it_calls(folder, tmp_path):
    script = tmp_path / "commands.txt"
    script.write_text("break function module_b.mul\nbreak dispatch 0 after\ncontinue\n"
                      f"save-tensors {tmp_path / 'abs'}\ncontinue\ncontinue\n")  # fmt: skip
    proc = lens_in_process("debug", str(built(folder, "pipeline")), "--function=run", f"--input={INPUT}",
                           f"--commands={script}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("Stopped")]
    assert "after dispatch #0 abs_dispatch_0" in lines[0] and "in module_a.abs pc" in lines[0]
    assert lines[1].startswith("Stopped (breakpoint) in module_b.mul pc 0x0")
    # The dispatch's tensors, saved at the stop, typed by the sources of the module it ran in (the program
    # has none of its own): x in, |x| out.
    assert "the sources of the modules it calls" in proc.stderr
    saved = {f.name: np.load(f) for f in (tmp_path / "abs").glob("*.npy")}
    np.testing.assert_array_equal(saved["dispatch0_after_input0.npy"], X)
    np.testing.assert_array_equal(saved["dispatch0_after_output0.npy"], np.abs(X))
    # The --json stop record names the module too.
    script.write_text("break function module_b.mul\ncontinue\ncontinue\n")
    proc = lens_in_process("debug", str(built(folder, "pipeline")), "--function=run", f"--input={INPUT}",
                           f"--commands={script}", "--json")  # fmt: skip
    stop = json.loads(proc.stdout.splitlines()[0])
    assert (stop["module"], stop["function"], stop["pc"]) == ("module_b", "mul", 0), stop
    # A module name that is not linked is refused with the functions there are, each with its module.
    script.write_text("break function module_c.abs\ncontinue\n")
    proc = lens_in_process("debug", str(built(folder, "pipeline")), "--function=run", f"--input={INPUT}",
                           f"--commands={script}")  # fmt: skip
    assert "module_a.abs" in proc.stderr and "module_b.mul" in proc.stderr and "module.run" in proc.stderr


def test_capture_records_their_dispatches(folder, tmp_path):
    proc = lens_in_process("capture", str(built(folder, "pipeline")), "--function=run", f"--input={INPUT}",
                           f"--out={tmp_path / 'bundle'}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "bundle")
    names = [d.name for d in bundle.dispatches]
    assert len(names) == 2 and names[0].startswith("abs_dispatch_0") and names[1].startswith("mul_dispatch_0")
    # Typed by the sources of the modules it calls: mul's output is |x| * |x|.
    mul = bundle.dispatches[1]
    assert mul.output_types == ["8xf32"], mul.output_types
    np.testing.assert_array_equal(bundle.load(mul.outputs[0]), np.abs(X) * np.abs(X))


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_profile_sees_their_dispatches(folder, tmp_path, engine):
    # The reference engine's profile is IREE's own (iree-run-module): it is given the modules too.
    proc = lens_in_process("profile", str(built(folder, "pipeline")), f"--engine={engine}", "--function=run",
                           f"--input={INPUT}", f"--out={tmp_path / 'profile.json'}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2 dispatches"), proc.stdout
    assert json.loads((tmp_path / "profile.json").read_text())


@pytest.mark.parametrize("command", ["debug", "capture", "profile"])
def test_the_modules_can_be_given_as_iree_run_module_takes_them(folder, tmp_path, command):
    lone = shutil.copy(built(folder, "pipeline"), tmp_path / "pipeline.vmfb")  # nothing beside it
    given = [f"--module={built(folder, 'module_a')}", f"--module={built(folder, 'module_b')}"]
    extra = {"debug": [f"--commands={tmp_path / 'commands.txt'}"], "capture": [f"--out={tmp_path / 'bundle'}"],
             "profile": [f"--out={tmp_path / 'profile.json'}"]}[command]  # fmt: skip
    (tmp_path / "commands.txt").write_text("break function module_a.abs\ncontinue\ncontinue\n")
    proc = lens_in_process(command, str(lone), *given, "--function=run", f"--input={INPUT}", *extra)
    assert proc.returncode == 0, proc.stderr
    if command == "debug":
        assert "Stopped (breakpoint) in module_a.abs pc 0x0" in proc.stdout and "Finished run" in proc.stdout
    without = lens_in_process(command, str(lone), "--function=run", f"--input={INPUT}", *extra)
    assert without.returncode != 0 and "--module=FILE" in without.stderr + without.stdout


def test_a_vs_code_launch_passes_the_modules(folder, tmp_path):
    from support.dap import launch_reply

    lone = shutil.copy(built(folder, "pipeline"), tmp_path / "pipeline.vmfb")
    for modules, opens in (([str(built(folder, "module_a")), str(built(folder, "module_b"))], True), ([], False)):
        reply = launch_reply({"program": str(lone), "function": "run", "inputs": [INPUT], "modules": modules}, opens)
        assert reply["success"] is opens, reply
        if not opens:
            assert "--module=FILE" in reply["message"]


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_an_asynchronous_pipeline_passes_fences_between_modules(tmp_path, engine):
    # All three built async-external: @run takes the caller's fences (added as iree-run-module adds them) and
    # passes a pair down on each call into the modules it calls.
    for name in ("module_a", "module_b", "pipeline_async"):
        compile_program(str(LINKED / f"{name}.mlir"), "llvm-cpu", tmp_path, "--iree-execution-model=async-external")
    pipeline = tmp_path / "pipeline_async.llvm-cpu.traced.vmfb"
    proc = lens_in_process("run", str(pipeline), f"--engine={engine}", "--function=run", f"--input={INPUT}")
    assert proc.returncode == 0, proc.stderr
    modules = [tmp_path / f"{n}.llvm-cpu.traced.vmfb" for n in ("module_a", "module_b", "pipeline_async")]
    assert proc.stdout == iree_run_module_stdout(modules, "run", [INPUT])
