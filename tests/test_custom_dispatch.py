"""A hand-written dispatch whose work is a function from an object file (``hal.executable.object``; IREE's
samples/custom_dispatch/cpu/embedded) runs in both engines as in IREE's runtime; its tensors are typed by its
hand-written subspans (``memref<?xf32>{%dim}``, no ``flags``: the pipeline layout says which are read); the
kernel stepper and an edited source link the object where IREE's compile found it, from any folder.

The object is built here from LLVM IR (llvmlite), as IREE's sample builds it from C with clang.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import iree_run_module_stdout, iree_tool, lens_in_process
from support.executable_plugin import MUL_ELEMENTS_IR, object_file
from support.session import PROGRAMS

from engine.dispatch.rebuild_sources import found_or_rebuilt
from engine.dispatch.tensor_types import binding_interfaces
from engine.kernel.executable_objects import declared_objects, find_objects

PROGRAM = PROGRAMS / "custom_dispatch" / "mul_object.mlir"
X = np.float32([1, -2, 3, 0.5, 8, -1, 2, 6])
Y = np.float32([4, 4, -1, 2, 0.25, 3, -2, 1])
INPUTS = ["8xf32=" + " ".join(f"{v:g}" for v in X), "8xf32=" + " ".join(f"{v:g}" for v in Y)]

# simple_mul_workgroup of IREE's functions.c: binding2[o2 + i] = binding0[o0 + i] * binding1[o1 + i] for the
# workgroup's 64 elements (fewer at the end).
SIMPLE_MUL_IR = """
define void @simple_mul_workgroup(ptr %b0, i64 %o0, ptr %b1, i64 %o1, ptr %b2, i64 %o2, i64 %dim, i64 %tid) {
  %full = add i64 %tid, 64
  %short = icmp ult i64 %dim, %full
  %end = select i1 %short, i64 %dim, i64 %full
  call void @mul_elements(ptr %b0, i64 %o0, ptr %b1, i64 %o1, ptr %b2, i64 %o2, i64 %tid, i64 %end)
  ret void
}
""" + MUL_ELEMENTS_IR


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The program, its object and its module, built as a user builds them: in one folder."""
    out = tmp_path_factory.mktemp("custom_dispatch")
    shutil.copy(PROGRAM, out)
    (out / "functions_x86_64.o").write_bytes(object_file(SIMPLE_MUL_IR))
    proc = subprocess.run([iree_tool("iree-compile"), PROGRAM.name, "-o", "mul_object.vmfb"], cwd=out,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def test_hand_written_subspans_are_typed_and_read_as_their_layout_says():
    interface = binding_interfaces(PROGRAM.read_text())["simple_mul"]
    assert [b.tensors[0].element for b in interface.values()] == ["f32"] * 3
    assert [b.modes for b in interface.values()] == [("readonly",), ("readonly",), ("readwrite",)]
    assert {b.layout for b in interface.values()} == {(3, 1)}  # the alias spans four lines
    assert interface[0].dynamic_dims == (((0, ("push", 0)),),)  # its length: push constant 0


def test_the_objects_an_executable_names_are_looked_for_as_iree_does(folder, tmp_path):
    assert declared_objects(PROGRAM.read_text()) == (["functions_x86_64.o"], 0)
    assert find_objects(PROGRAM, [tmp_path, folder]).found == (folder / "functions_x86_64.o",)
    missing = find_objects(PROGRAM, [tmp_path])
    assert missing.found == () and missing.missing == ("functions_x86_64.o",)


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_both_engines_print_what_iree_run_module_prints(folder, engine):
    proc = lens_in_process("run", str(folder / "mul_object.vmfb"), f"--engine={engine}", "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == iree_run_module_stdout(folder / "mul_object.vmfb", "mul_add", INPUTS)
    assert "8xf32=" + " ".join(f"{v:g}" for v in X * Y + Y) in proc.stdout


def test_every_dispatch_is_typed_by_the_program_rebuilt(folder, tmp_path):
    # The program beside the module declares the hand-written executable only; the rebuild declares both.
    sources = found_or_rebuilt(folder / "mul_object.vmfb")
    assert sources.origin == "rebuilt" and len(sources.interfaces) == 2, sources.note
    out = tmp_path / "capture"
    proc = lens_in_process("capture", str(folder / "mul_object.vmfb"), "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS], f"--out={out}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    mul, add = manifest["dispatches"]
    assert mul["name"] == "simple_mul" and mul["tensors_from"] == add["tensors_from"] == "interface"
    # Binding 2 is not ReadOnly in the layout: read-write, shown before the dispatch too (what it held).
    assert mul["input_types"] == ["8xf32"] * 3 and add["input_types"] == ["8xf32"] * 2
    assert mul["output_types"] == add["output_types"] == ["8xf32"]
    np.testing.assert_array_equal(np.load(out / mul["outputs"][0]), X * Y)
    np.testing.assert_array_equal(np.load(out / add["outputs"][0]), X * Y + Y)


def test_the_kernel_stepper_links_the_object_from_any_folder(folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not where the program was compiled
    proc = lens_in_process("kernel", str(folder / "mul_object.vmfb"), "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS], "--dispatch=0", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "linked from functions_x86_64.o" in proc.stderr and "unrecorded" in proc.stderr
    steps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert any("hal.interface.constant.load" in json.dumps(s) for s in steps)


def test_an_edited_source_links_the_object_from_any_folder(folder, tmp_path, monkeypatch):
    source = found_or_rebuilt(folder / "mul_object.vmfb").files["simple_mul"]
    text = Path(source).read_text()
    call = "@simple_mul_workgroup(%base_buffer, %offset, %base_buffer_0, %offset_1,"  # as IREE prints it
    assert call in text
    edited = tmp_path / "squares.mlir"  # binding 1 times itself: y * y
    edited.write_text(text.replace(call, "@simple_mul_workgroup(%base_buffer_0, %offset_1, %base_buffer_0, %offset_1,"))
    monkeypatch.chdir(tmp_path)
    proc = lens_in_process("run", str(folder / "mul_object.vmfb"), "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS], f"--substitute=simple_mul={edited}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "8xf32=" + " ".join(f"{v:g}" for v in Y * Y + Y) in proc.stdout
