"""A function that takes the storage for its transients from its caller (``!hal.buffer {iree.abi.transients}``;
IREE's samples/external_transients) is called as iree-run-module calls it, the storage given as a buffer
(``--input=&512xi8``), in both engines, a capture and its golden replay. The storage's size is checked first:
IREE's dispatches bind the whole buffer and would write past the end of one too small; the window's default
inputs size it as the reflection says."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import compile_for, iree_run_module_stdout, lens_in_process
from support.session import PROGRAMS

from app.input_defaults import default_inputs
from engine.runtime.function_io import Storage, parse_inputs
from engine.runtime.vmfb.module import open_vmfb
from engine.runtime.vmfb.transients import reflection_of, transients_in

PROGRAM = PROGRAMS / "transients" / "in_place.mlir"
X = np.arange(64, dtype=np.float32) / 8 - 3
INPUTS = ["64xf32=" + " ".join(f"{v:g}" for v in X), "64xf32=0", "&512xi8"]


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    return compile_for(PROGRAM, tmp_path_factory.mktemp("transients") / "in_place.vmfb", "llvm-cpu")


def test_the_reflection_names_the_storage_and_its_size(module):
    transients = transients_in(reflection_of(open_vmfb(module), "in_place_computation"))
    assert (transients.argument, transients.size) == (2, 512)
    assert transients.size_function == "in_place_computation_transients_size"
    (storage,) = parse_inputs(["&512xi8"], "r")
    assert isinstance(storage, Storage) and storage.tensor.array.nbytes == 512
    assert default_inputs(open_vmfb(module), "in_place_computation") == ("64xf32=0", "64xf32=0", "&512xi8")


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_both_engines_print_what_iree_run_module_prints(module, engine):
    proc = lens_in_process("run", str(module), f"--engine={engine}", "--function=in_place_computation",
                           *[f"--input={i}" for i in INPUTS])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == iree_run_module_stdout(module, "in_place_computation", INPUTS)
    assert "64xf32=" + " ".join(f"{v:g}" for v in (X + 1) * 2 + X) in proc.stdout


@pytest.mark.parametrize("engine", ["debug", "reference"])
@pytest.mark.parametrize(("storage", "said"), [
    ("&64xi8", "holds 64 bytes; it needs 512"),  # IREE's runtime would write 448 bytes past its end
    ("512xi8=0", "give a buffer, --input=&512xi8"),  # a tensor: IREE says "ref type mismatch"
])  # fmt: skip
def test_storage_that_cannot_hold_the_transients_is_refused_before_the_call(module, engine, storage, said):
    proc = lens_in_process("run", str(module), f"--engine={engine}", "--function=in_place_computation",
                           *[f"--input={i}" for i in (*INPUTS[:2], storage)])  # fmt: skip
    assert proc.returncode == 1 and said in proc.stderr, proc.stderr


def test_a_capture_replays_with_the_storage_given_again(module, tmp_path):
    out = tmp_path / "capture"
    proc = lens_in_process("capture", str(module), "--function=in_place_computation",
                           *[f"--input={i}" for i in INPUTS], f"--out={out}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][2] == "&512xi8" and len(manifest["dispatches"]) == 3
    proc = lens_in_process("run", f"--golden={out}")
    assert proc.returncode == 0 and "output 0 matches" in proc.stdout, proc.stdout + proc.stderr
