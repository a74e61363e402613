"""The roofline says only what its figures support: where the bytes are the whole bound ranges (an upper
bound: no executable source types the tensors), the intensity is a lower bound, so "memory-bound" is not
known unless the true intensity could not reach the compute roof anyway, and the share of the roof is at
most the figure. squeezenet's dispatch 33 (a 3x3 convolution, 49.88 MFLOP) binds 13 MB of slabs for 0.82 MB
of tensors: it was called memory-bound at 3.8 FLOP/byte, where its tensors give 61, compute-bound."""

from __future__ import annotations

from engine.dispatch.roofline import MachineLimits, Roofline

LIMITS = MachineLimits(bandwidth_bytes_s=22e9, peak_flops_s=90e9)  # balance about 4.1 FLOP/byte
FLOPS = 49.88e6


def test_bytes_an_upper_bound_leave_the_bound_unknown_and_the_share_at_most():
    roof = Roofline(13_026_000, FLOPS, 0.027, LIMITS, bytes_from="bindings")
    assert roof.bound is None and roof.share_is_upper_bound
    text = roof.describe()
    assert "memory- or compute-bound: not known" in text and "memory-bound" not in text.replace("memory- or", "")
    assert "at most 13.026 MB moved" in text and "at least 3.83 FLOP/byte" in text and "= at most " in text
    assert roof.as_dict()["bound"] is None and roof.as_dict()["share_is_upper_bound"] is True


def test_bytes_an_upper_bound_that_still_reach_the_compute_roof_are_compute_bound():
    roof = Roofline(200_000, FLOPS, 0.027, LIMITS, bytes_from="bindings")  # 249 FLOP/byte at the least
    assert roof.bound == "compute" and not roof.share_is_upper_bound
    assert roof.share_of_roof == (FLOPS / 0.027) / LIMITS.peak_flops_s  # the compute roof is exact
    assert "compute-bound" in roof.describe() and "= at most" not in roof.describe()


def test_the_tensors_bytes_are_exact():
    tensors = 4 * (64 * 15 * 15 + 256 * 64 * 3 * 3 + 256 + 256 * 13 * 13)
    assert Roofline(tensors, FLOPS, 0.027, LIMITS).bound == "compute"  # 61 FLOP/byte
    memory = Roofline(tensors * 100, FLOPS, 0.027, LIMITS)
    assert memory.bound == "memory" and not memory.share_is_upper_bound
    assert "memory-bound" in memory.describe() and "at most" not in memory.describe()
