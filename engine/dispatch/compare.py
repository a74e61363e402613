"""Comparing a tensor with golden data or with the same tensor of another run: the names earlier code
imports; the comparison itself lives in ``engine.dispatch.numerics`` (one module for every comparing
feature)."""

from engine.dispatch.numerics import (
    CHUNK_ELEMENTS,
    Comparison,
    GoldenError,
    Tolerance,
    Verdict,
    compare,
    error_map,
    load_golden,
)

__all__ = ["CHUNK_ELEMENTS", "Comparison", "GoldenError", "Tolerance", "Verdict", "compare", "error_map", "load_golden"]
