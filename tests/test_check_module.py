"""The ``check`` module (IREE's e2e expectations) on both engines, and ``iree-lens run`` on programs using it.

The comparisons are checked against independent oracles (numpy's ``isclose``, ml_dtypes' float decoders);
our own e2e programs (``tests/e2e_programs/``) run through the command line on IREE's runtime and on the
debug engine, which must print the same failures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from support import iree_compile

from engine.cli import main as cli_main
from engine.compiler.targets import TARGETS
from engine.runtime import element_types as et
from engine.runtime.check import (
    CheckError,
    Operand,
    expect_all_true,
    expect_almost_eq,
    expect_eq,
    expect_false,
    expect_true,
    imports_check_module,
)
from engine.runtime.check.expectations import _floats

PROGRAMS = Path(__file__).parent / "e2e_programs"
PASSING = [
    "eq_i32",
    "eq_i8_2d",
    "almost_eq_default_tolerance",
    "almost_eq_explicit_tolerance",
    "almost_eq_f16_and_infinity",
    "scalars_true_false",
    "all_true_i32",
]
# function -> fragments its failure report must contain (what was expected, what was found).
FAILING = {
    "eq_contents": [
        "@eq_contents: check.expect_eq failed: Expected equality of these values. Contents does not match.",
        "  lhs:\n    3xi32=2 4 6\n  rhs:\n    3xi32=2 4 7\n",
    ],
    "almost_eq_outside_default_atol": [
        "atol=0.0001, rtol=0. The first failure occurs at index 1 as the lhs value 2.0003 differs from the "
        "rhs value 2 by -2.999e-04.",
        "  lhs:\n    2xf32=1 2.0003\n  rhs:\n    2xf32=1 2\n",
    ],
    "almost_eq_rtol_is_asymmetric": ["atol=0, rtol=0.5.", "lhs value 200 differs from the rhs value 100"],
    "true_of_zero": ["@true_of_zero: check.expect_true failed: Expected 0 to be nonzero."],
    "false_of_nonzero": ["@false_of_nonzero: check.expect_false failed: Expected 42 to be zero."],
    "all_true_with_a_zero": ["Element #1 is zero", "4xi32=3 0 1 0"],
    "two_failures_then_a_pass": [
        "check.expect_almost_eq failed",
        "1xi32=7\n  rhs:\n    1xi32=8",
        "2 expectation(s)",
    ],
    "all_true_of_i1_is_unsupported": ["unsupported element type i1"],
}


def _operand(array, element_type=None) -> Operand:
    array = np.asarray(array)
    code = element_type if element_type is not None else et.element_type_for_dtype(array.dtype)
    return Operand.from_bytes(code, array.shape, np.ascontiguousarray(array).view(np.uint8))


# ----------------------------------------------------------------------------------- pure comparisons


def test_almost_eq_agrees_with_numpy_isclose_on_special_values():
    values = np.array(
        [0.0, -0.0, 1.0, -1.0, 1e-5, 1e30, np.inf, -np.inf, np.nan, 3.0, 2.9999, 1e-38], np.float32
    )
    rng = np.random.default_rng(7)
    pairs = [(a, b) for a in values for b in values]
    pairs += [
        (np.float32(x), np.float32(x + d)) for x, d in zip(rng.normal(size=200), rng.normal(0, 2e-4, 200))
    ]
    for atol, rtol in ((1e-4, 0.0), (0.0, 1e-3), (1e-2, 0.5)):
        for a, b in pairs:
            # numpy's isclose is IREE's rule: |a - b| <= atol + rtol * |b| (b expected), NaN equals NaN.
            want = bool(
                np.isclose(
                    np.float64(a), np.float64(b), rtol=np.float32(rtol), atol=np.float32(atol), equal_nan=True
                )
            )
            got = expect_almost_eq(_operand([a]), _operand([b]), atol, rtol) is None
            assert got == want, (a, b, atol, rtol)


def test_almost_eq_reports_the_first_failing_index_like_iree():
    lhs = _operand(np.array([[1.0, 2.0], [3.5, 9.0]], np.float32))
    rhs = _operand(np.array([[1.0, 2.00001], [3.0, 4.0]], np.float32))
    message = expect_almost_eq(lhs, rhs)
    assert message.startswith(
        "Expected near equality of these values. Contents does not match to tolerance parameters "
        "atol=0.0001, rtol=0. The first failure occurs at index 2 as the lhs value 3.5 differs from the "
        "rhs value 3 by -5.000e-01.\n"
    )
    assert message.endswith("  lhs:\n    2x2xf32=[1 2][3.5 9]\n  rhs:\n    2x2xf32=[1 2.00001][3 4]")


def test_eq_is_bytewise_and_names_each_mismatch():
    assert expect_eq(_operand(np.arange(6, dtype=np.int32)), _operand(np.arange(6, dtype=np.int32))) is None
    # Same bytes, another shape: only the shape differs.
    message = expect_eq(
        _operand(np.arange(6, dtype=np.int32).reshape(2, 3)), _operand(np.arange(6, dtype=np.int32))
    )
    assert "Shapes do not match." in message and "Contents" not in message and "Element types" not in message
    # -0.0 and 0.0 compare equal as floats but not as bytes; two NaN payloads differ too.
    assert "Contents does not match." in expect_eq(_operand(np.float32([0.0])), _operand(np.float32([-0.0])))
    nans = np.array([0x7FC00000, 0x7FC00001], np.uint32).view(np.float32)
    assert expect_eq(_operand(nans[:1]), _operand(nans[1:])) is not None
    assert expect_almost_eq(_operand(nans[:1]), _operand(nans[1:])) is None
    assert expect_almost_eq(_operand(np.float32([0.0])), _operand(np.float32([-0.0]))) is None
    # Element types: same bytes as i32 and f32.
    message = expect_eq(_operand(np.int32([0])), _operand(np.float32([0])))
    assert "Element types do not match." in message and "Contents" not in message
    assert "Element types do not match." in expect_almost_eq(
        _operand(np.float32([0])), _operand(np.float64([0]))
    )


def test_scalars_and_all_true():
    assert expect_true(1) is None and expect_true(-1) is None
    assert expect_true(0) == "Expected 0 to be nonzero."
    assert expect_false(0) is None
    assert expect_false(0xFFFFFFFF) == "Expected -1 to be zero."  # an i32 register, read signed
    for dtype in (
        np.int8,
        np.uint8,
        np.int16,
        np.uint16,
        np.int32,
        np.uint32,
        np.int64,
        np.uint64,
        np.float32,
        np.float64,
    ):
        assert expect_all_true(_operand(np.array([1, 2, 3], dtype))) is None, dtype
        assert "Element #2 is zero" in expect_all_true(_operand(np.array([1, 2, 0], dtype))), dtype
    assert "Element #0 is zero" in expect_all_true(_operand(np.float32([-0.0, 1.0])))


def test_unsupported_element_types_raise_like_iree():
    # IREE's check module: INVALID_ARGUMENT "unsupported element type ..." (the call fails).
    with pytest.raises(CheckError, match="unsupported element type i1"):
        expect_all_true(_operand(np.array([True, True])))
    with pytest.raises(CheckError, match="unsupported element type f16"):
        expect_all_true(_operand(np.float16([1.0])))
    with pytest.raises(CheckError, match="unsupported element type i32"):
        expect_almost_eq(_operand(np.int32([1])), _operand(np.int32([1])))


@pytest.mark.parametrize(
    "numerical_type,ml_type",
    [
        (et.F8_E5M2, ml_dtypes.float8_e5m2),
        (et.F8_E4M3FN, ml_dtypes.float8_e4m3fn),
        (et.F8_E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
        (et.F8_E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
        (et.F8_E8M0FNU, ml_dtypes.float8_e8m0fnu),
    ],
)
def test_f8_values_match_ml_dtypes(numerical_type, ml_type):
    codes = np.arange(256, dtype=np.uint8)
    ours = _floats(Operand(et.make(numerical_type, 8), (256,), codes))
    want = codes.view(ml_type).astype(np.float64)
    np.testing.assert_array_equal(ours, want)  # NaNs in the same places


def test_bf16_and_f16_values():
    bits = np.arange(0, 1 << 16, 7, dtype=np.uint16)
    ours = _floats(Operand(et.BF16, bits.shape, bits.view(np.uint8)))
    with np.errstate(invalid="ignore"):
        want = bits.view(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(ours, want)
    ours = _floats(Operand(et.F16, bits.shape, bits.view(np.uint8)))
    np.testing.assert_array_equal(ours, bits.view(np.float16).astype(np.float64))


# ------------------------------------------------------------------------------ programs, command line


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """check_pass / check_fail compiled for vmvx and llvm-cpu with the real iree-compile."""
    out = tmp_path_factory.mktemp("check_programs")
    paths = {}
    for name in ("check_pass", "check_fail"):
        for target in ("vmvx", "llvm-cpu"):
            vmfb = out / f"{name}-{target}.vmfb"
            cmd = [
                str(PROGRAMS / f"{name}.mlir"),
                *TARGETS[target].flags,
                "-o",
                str(vmfb),
            ]
            done = iree_compile(cmd, text=True)
            assert done.returncode == 0, done.stderr
            paths[name, target] = vmfb
    return paths


def _engines():
    engines = ["reference"]
    try:
        import engine.runtime.debug_runner  # noqa: F401
    except ImportError:  # the debug engine lands separately
        return engines
    return [*engines, "debug"]


def _run(capsys, vmfb, function, engine):
    rc = cli_main(["run", str(vmfb), f"--function={function}", f"--engine={engine}"])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_check_imports_are_detected(programs, compiled):
    assert imports_check_module(programs["check_pass", "vmvx"])
    assert not imports_check_module(compiled.path("matmul", "vmvx"))


@pytest.mark.parametrize("target", ["vmvx", "llvm-cpu"])
@pytest.mark.parametrize("engine", _engines())
def test_passing_expectations_exit_zero(programs, capsys, engine, target):
    for function in PASSING:
        rc, out, err = _run(capsys, programs["check_pass", target], function, engine)
        assert (rc, err) == (0, ""), function
        assert out == f"EXEC @{function}\n"


@pytest.mark.parametrize("engine", _engines())
def test_failing_expectations_print_expected_and_found(programs, capsys, engine):
    reports = {}
    for function, fragments in FAILING.items():
        rc, out, err = _run(capsys, programs["check_fail", "vmvx"], function, engine)
        assert rc == 1, function
        for fragment in fragments:
            assert fragment in err, (function, err)
        reports[function] = err
    # Failures collected in one function (the call goes on after a failed expectation).
    assert reports["two_failures_then_a_pass"].count("failed: Expected") == 2


def test_engines_report_the_same_failures(programs, capsys):
    if "debug" not in _engines():
        pytest.skip("the debug engine is not in this tree")
    for function in FAILING:
        if function == "all_true_of_i1_is_unsupported":
            continue  # the error texts of the two runtimes differ around the shared message
        _, _, reference = _run(capsys, programs["check_fail", "llvm-cpu"], function, "reference")
        _, _, debug = _run(capsys, programs["check_fail", "llvm-cpu"], function, "debug")
        assert debug == reference, function


def test_command_exit_status(programs):
    """The real command line: the process exits non-zero on a failed expectation, zero otherwise."""
    base = [sys.executable, "-m", "app.launcher", "run", "--engine=reference"]
    ok = subprocess.run(
        [*base, str(programs["check_pass", "vmvx"]), "--function=eq_i32"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [*base, str(programs["check_fail", "vmvx"]), "--function=eq_contents"], capture_output=True, text=True
    )
    assert bad.returncode == 1
    assert "3xi32=2 4 7" in bad.stderr and "nanobind" not in bad.stderr


@pytest.mark.vulkan
def test_vulkan_expectations_on_both_engines(tmp_path, capsys):
    """On Vulkan the operands live in device memory: both engines read them back and agree."""
    paths = {}
    for name in ("check_pass", "check_fail"):
        vmfb = paths[name] = tmp_path / f"{name}.vmfb"
        cmd = [str(PROGRAMS / f"{name}.mlir"), *TARGETS["vulkan-spirv"].flags]
        done = iree_compile([*cmd, "-o", str(vmfb)], text=True)
        assert done.returncode == 0, done.stderr
    reports = {}
    for engine in _engines():
        for function in ("eq_i32", "almost_eq_default_tolerance", "all_true_i32"):
            rc = cli_main(
                [
                    "run",
                    str(paths["check_pass"]),
                    f"--function={function}",
                    "--device=vulkan",
                    f"--engine={engine}",
                ]
            )
            assert (rc, capsys.readouterr().err) == (0, ""), (engine, function)
        for function in ("eq_contents", "two_failures_then_a_pass", "all_true_with_a_zero"):
            rc = cli_main(
                [
                    "run",
                    str(paths["check_fail"]),
                    f"--function={function}",
                    "--device=vulkan",
                    f"--engine={engine}",
                ]
            )
            reports[engine, function] = (rc, capsys.readouterr().err)
            assert rc == 1 and "failed: Expected" in reports[engine, function][1], (engine, function)
    if "debug" in _engines():
        for function in ("eq_contents", "two_failures_then_a_pass", "all_true_with_a_zero"):
            assert reports["debug", function] == reports["reference", function]
