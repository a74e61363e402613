"""Inputs parsed and results printed exactly as IREE's own iree-run-module does (differential)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from support import RUN_CASES, iree_tool, lens_run

from engine.runtime.function_io import (
    InputError,
    Scalar,
    Tensor,
    format_results,
    parse_inputs,
    parse_tensor,
    write_outputs,
)
from engine.runtime.reference import ReferenceRunError, ReferenceRunner


def iree_run_module(vmfb, function, inputs, device="local-sync"):
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", f"--device={device}", f"--function={function}"]
    cmd += [f"--input={i}" for i in inputs]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("sample,function,inputs", RUN_CASES, ids=[f"{c[0]}.{c[1]}" for c in RUN_CASES])
def test_reference_run_prints_like_iree_run_module(compiled, sample, function, inputs):
    vmfb = compiled.path(sample, "llvm-cpu")
    expected = iree_run_module(vmfb, function, inputs)
    assert expected.returncode == 0, expected.stderr
    cli = lens_run(vmfb, function, inputs, "reference")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == expected.stdout


def test_bad_input_shape_fails_with_iree_status(compiled):
    runner = ReferenceRunner(compiled.path("matmul", "llvm-cpu"))
    with pytest.raises(ReferenceRunError) as e:
        runner.invoke("main", parse_inputs(["4x7xf32=1", "8x16xf32=1"], "rr"))
    assert e.value.status == "INVALID_ARGUMENT"
    assert "input0 shape dimension 1 mismatch" in str(e.value)


def test_parse_tensor_forms():
    t = parse_tensor("2x3xf32=[1 2 3][4 5 6]")
    assert t.element_type.name == "f32" and t.array.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert parse_tensor("2x2xi32=7").array.tolist() == [[7, 7], [7, 7]]
    assert parse_tensor("3xi8=-1 255 128").array.tolist() == [-1, -1, -128]  # wraps like C
    assert parse_tensor("f32=2.5").shape == ()
    assert parse_tensor("4xf32").array.tolist() == [0, 0, 0, 0]
    with pytest.raises(InputError, match="underflow"):
        parse_tensor("4xf32=1 2")
    with pytest.raises(InputError, match="overflow"):
        parse_tensor("2xf32=1 2 3")
    with pytest.raises(InputError, match="element type"):
        parse_tensor("2xq7=1")


def test_numpy_files_round_trip(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, -2], dtype=np.int64)
    np.save(tmp_path / "a.npy", a)
    np.savez(tmp_path / "ab.npz", a=a, b=b)
    values = parse_inputs([f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'ab.npz'}", "7"], "rrrI")
    assert [type(v) for v in values] == [Tensor, Tensor, Tensor, Scalar]
    assert np.array_equal(values[2].array, b) and values[2].element_type.name == "i64"
    out = tmp_path / "out.npy"
    printed = write_outputs([f"@{out}", f"+{out}", "-"], [values[0], values[2], values[3]])
    with open(out, "rb") as f:
        assert np.array_equal(np.load(f), a) and np.array_equal(np.load(f), b)
    assert printed == "result[2]: i64=7\n"
    with pytest.raises(InputError, match="does not exist"):
        parse_inputs(["@/nonexistent/x.npy"], "r")


def test_format_truncates_after_1024_elements():
    text = format_results([parse_tensor("2x1000xi32=1")])
    # IREE's budget is shared across rows: 1000 in the first row, 24 then "..." in the second.
    first, second = text.split("=", 1)[1].strip().split("][")
    assert first.count("1") == 1000 and not first.endswith("...")
    assert second.count("1") == 24 and second.endswith("...]")
