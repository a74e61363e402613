"""The paused dispatch's tensor labels say only what is known: an untyped binding before its dispatch runs
may hold an earlier dispatch's results, so it is "before it runs", not "not written yet" (which read
as if its bytes were garbage); a typed output before its dispatch is "not written yet"."""

from __future__ import annotations

import numpy as np

from app.views.dispatch_run_live import ShownTensor
from engine.session.protocol import TypeSource


def shown(role: str, source: str, access: str, written: bool) -> ShownTensor:
    return ShownTensor(role, 0, 2, 0, np.zeros(4, np.uint8), "4 bytes, untyped", source, access, written)


def test_before_a_dispatch_only_a_typed_output_is_not_written_yet():
    assert shown("binding", TypeSource.UNTYPED, "unknown", False).label == (
        "binding 2, access unknown, before it runs")
    assert shown("output", TypeSource.SOURCES, "write", False).label == "binding 2, write, output 0, not written yet"
    assert shown("input", TypeSource.SOURCES, "read", True).label == "binding 2, read, input 0"
    assert shown("binding", TypeSource.UNTYPED, "unknown", True).label == "binding 2, access unknown"
