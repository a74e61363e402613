"""numerics: the comparison every comparing feature uses (ulps, error against the tensor's scale, verdicts)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from engine.dispatch.numerics import (
    Tolerance,
    Verdict,
    compare,
    finite_scale,
    rounding_allowance,
    ulp_distance,
)


def test_ulp_distance_counts_representable_steps_across_zero_and_types():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2))
    assert ulp_distance(np.array([up]), np.array([one]))[0] == 1
    tiny = np.nextafter(np.float32(0), np.float32(1))
    # -tiny .. +tiny is two steps (through +0 == -0); +0 vs -0 is none.
    assert ulp_distance(np.array([-tiny]), np.array([tiny]))[0] == 2
    assert ulp_distance(np.array([np.float32(-0.0)]), np.array([np.float32(0.0)]))[0] == 0
    h = np.array([1.0], np.float16)
    assert ulp_distance(np.nextafter(h, np.float16(2)), h)[0] == 1
    b = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    b_up = (b.view(np.uint16) + 1).view(ml_dtypes.bfloat16)
    assert ulp_distance(b_up, b).tolist() == [1, 1]
    nan = np.array([np.nan, np.nan], np.float32)
    assert ulp_distance(nan, np.array([np.nan, 1.0], np.float32)).tolist() == [0, math.inf]


def test_a_near_zero_element_of_a_unit_tensor_is_rounding_not_a_large_relative_error():
    rng = np.random.default_rng(0)
    expected = rng.standard_normal(10_000).astype(np.float32)
    expected[17] = 7.5e-6  # near zero: 1e-6 off is 13% of itself
    actual = expected.copy()
    actual[17] += np.float32(1e-6)
    actual[::7] = np.nextafter(actual[::7], np.float32(np.inf))  # one ulp here and there
    c = compare(actual, expected)
    assert c.verdict is Verdict.WITHIN_ROUNDING and c.ok and c.mismatches == 0
    assert c.max_abs_error == pytest.approx(1e-6, rel=0.01)
    assert c.max_scaled_error < 1e-6 and c.max_rel_error < 2e-6  # relative error floored at the RMS
    assert c.max_ulps > 1000 and c.sqnr_db > 100 and c.cosine == pytest.approx(1.0)
    # A real change of 1% of the tensor's scale is a divergence, named at its index.
    actual[4242] += np.float32(0.01 * np.abs(expected).max())
    c = compare(actual, expected)
    assert c.verdict is Verdict.DIVERGED and c.mismatches == 1 and c.first_mismatch == (4242,)


def test_identical_tensors_are_exact_and_nan_inf_must_agree():
    x = np.array([[1.0, np.nan], [np.inf, -np.inf]], np.float32)
    c = compare(x, x.copy())
    assert c.verdict is Verdict.EXACT and c.nan_expected == 1 and c.inf_expected == 2 and c.nonfinite_agree
    y = x.copy()
    y[0, 1] = 1.0  # NaN where the reference has a number... the other way round
    y[1, 0] = -np.inf
    c = compare(y, x)
    assert c.verdict is Verdict.DIVERGED and c.nonfinite_mismatches == 2 and c.first_mismatch == (0, 1)
    assert c.to_json()["max_abs_error"] == "inf"  # JSON has no inf


def test_integers_and_booleans_compare_exactly_by_default():
    a = np.arange(1_000_000, dtype=np.int32)
    b = a.copy()
    b[123_456] += 1  # one part in a million: rounding for a float, a bug for an integer
    c = compare(b, a)
    assert c.verdict is Verdict.DIVERGED and c.mismatches == 1 and c.first_mismatch == (123_456,)
    assert compare(a, a.copy()).verdict is Verdict.EXACT
    m = np.array([True, False, True])
    assert compare(~m, m).mismatches == 3
    # An explicit tolerance is the user's: it applies to integers too.
    assert compare(b, a, atol=1).verdict is Verdict.WITHIN_TOLERANCE


def test_explicit_tolerances_replace_the_rounding_rule():
    expected = np.linspace(-1, 1, 100, dtype=np.float32)
    actual = expected.copy()
    actual[50] = np.nextafter(actual[50], np.float32(2))
    actual[51] = np.nextafter(np.nextafter(actual[51], np.float32(2)), np.float32(2))
    assert compare(actual, expected).verdict is Verdict.WITHIN_ROUNDING
    assert compare(actual, expected, atol=0.0).verdict is Verdict.DIVERGED  # exactness asked for
    assert compare(actual, expected, ulps=1).mismatches == 1  # the two-ulp element
    assert compare(actual, expected, ulps=2).verdict is Verdict.WITHIN_TOLERANCE
    assert compare(actual, expected, tolerance=Tolerance(atol=1e-3)).ok


def test_half_precision_allowance_is_wider_than_single_and_still_catches_bugs():
    assert rounding_allowance(np.dtype(np.float16)) > rounding_allowance(np.dtype(np.float32))
    assert rounding_allowance(np.dtype(ml_dtypes.bfloat16)) > rounding_allowance(np.dtype(np.float16))
    rng = np.random.default_rng(1)
    exact = rng.standard_normal(4096)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        expected = exact.astype(dtype)
        # Computed in f32 and rounded once more (another accumulation order): a step of the grid off.
        actual = (exact * (1 + 2e-3 * rng.standard_normal(4096) * float(ml_dtypes.finfo(dtype).eps))).astype(dtype)
        actual = (actual.view(np.uint16) + (np.arange(4096) % 2).astype(np.uint16)).view(dtype)
        assert compare(actual, expected).verdict is Verdict.WITHIN_ROUNDING, dtype
        broken = expected.copy()
        broken[10] = dtype(float(expected[10]) + 1.0)
        assert compare(broken, expected).verdict is Verdict.DIVERGED, dtype


def test_sentinels_do_not_set_the_scale():
    expected = np.full(64, 1.0, np.float32)
    expected[0] = -np.finfo(np.float32).max  # a mask value
    actual = expected.copy()
    actual[5] = 1.5
    c = compare(actual, expected)
    assert c.scale == pytest.approx(1.5) and c.verdict is Verdict.DIVERGED


def test_shapes_and_large_tensors():
    assert not compare(np.zeros(3), np.zeros(4)).shape_matches
    c = compare(np.zeros((2, 3)), np.zeros(6))
    assert c.ok and "compared flat" in c.note
    big = np.random.default_rng(2).standard_normal(3_000_000).astype(np.float32)  # spans chunks
    other = big.copy()
    other[2_500_000] = 100.0
    c = compare(other, big)
    assert c.mismatches == 1 and c.first_mismatch == (2_500_000,) and c.sqnr_db < 60


def test_reduction_length_from_iree_names_widens_the_allowance():
    from engine.dispatch.numerics import reduction_length_from_name

    assert reduction_length_from_name("main$async_dispatch_0_conv_64x111x111x3x3x3_f32") == 27
    assert reduction_length_from_name("main_dispatch_1_matmul_2x4x32_f32") == 32
    assert reduction_length_from_name("main_dispatch_0_reduction_64x1024_f32") == 1024
    assert reduction_length_from_name("main_dispatch_4_slow_memcpy") is None
    assert reduction_length_from_name("main_dispatch_0_elementwise_256_f32") is None
    f16 = np.dtype(np.float16)
    assert rounding_allowance(f16, 4608) > 10 * rounding_allowance(f16)  # summed in f16: sqrt(K) ulps
    assert rounding_allowance(f16, 10**12) <= 0.25  # never a quarter of the scale
    f32 = np.dtype(np.float32)
    assert rounding_allowance(f32, 64) == rounding_allowance(f32)  # short sums: the base allowance


def test_a_sum_that_cancels_is_judged_against_what_it_summed():
    # Row sums of values less their row mean: the results are pure rounding noise, orders of magnitude
    # below the terms. Summed pairwise (numpy) and one term after another (a loop in f32), they differ by
    # the rounding of the terms, far more than the results' own scale allows.
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    deviations = (x - x.mean(axis=1, keepdims=True)).astype(np.float32)
    pairwise = deviations.sum(axis=1, dtype=np.float32)
    sequential = np.zeros(64, np.float32)
    for column in deviations.T:
        sequential += column  # f32 accumulation, in order
    assert not np.array_equal(pairwise, sequential)
    length = deviations.shape[1]
    # Judged against the results' scale alone, the reassociation looks like a divergence ...
    assert compare(sequential, pairwise, tolerance=Tolerance(reduction_length=length)).verdict is Verdict.DIVERGED
    # ... against the scale of what was summed, it is rounding.
    judged = compare(sequential, pairwise, tolerance=Tolerance(reduction_length=length,
                                                               input_scale=finite_scale([deviations])))
    assert judged.verdict is Verdict.WITHIN_ROUNDING
    # A wrong sum is still caught: one row summed without its last 64 terms.
    broken = sequential.copy()
    broken[5] = deviations[5, :-64].sum(dtype=np.float32)
    wrong = compare(broken, pairwise, tolerance=Tolerance(reduction_length=length, input_scale=finite_scale([deviations])))
    assert wrong.verdict is Verdict.DIVERGED and wrong.first_mismatch == (5,)


def test_a_widened_rounding_is_reported_as_applied():
    # A mean over 64 terms read from inputs twice the results' scale: the rule is widened to the inputs'
    # scale, and the rounding reported is that widened allowance said against the results' own scale, so
    # max_scaled_error beyond it is exactly a mismatch (the unwidened figure was reported: an error above
    # "rounding" with no mismatch counted).
    rng = np.random.default_rng(3)
    expected = rng.uniform(0.5, 3.77, 16).astype(np.float32)
    rule = Tolerance(reduction_length=64, input_scale=7.61)
    for divisor, verdict in ((64.02, Verdict.WITHIN_ROUNDING), (64.1, Verdict.DIVERGED)):
        actual = (expected * np.float32(64) / np.float32(divisor)).astype(np.float32)
        judged = compare(actual, expected, tolerance=rule)
        assert judged.verdict is verdict
        assert (judged.mismatches == 0) == (judged.max_scaled_error <= judged.rounding)
        assert judged.rounding_scale == 7.61
        assert judged.rounding * judged.scale == pytest.approx(rounding_allowance(np.dtype(np.float32), 64) * 7.61)
        assert "inputs' (7.61)" in judged.tolerance_text and judged.to_json()["rounding_scale"] == 7.61
    # without a wider input scale, the rule is the dtype's allowance against the tensor's scale, as before
    plain = compare(expected * np.float32(1.0001), expected)
    assert plain.rounding == rounding_allowance(np.dtype(np.float32)) and plain.rounding_scale == plain.scale
