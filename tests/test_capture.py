"""Tensor capture during a debug run keeps memory bounded and every tensor readable."""

from __future__ import annotations

import numpy as np

from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs
from engine.session.capture import TensorCapture
from engine.session.tensor_store import TensorStore


def test_capture_of_many_dispatches_spills_and_reads_back(compiled, tmp_path):
    runner = DebugRunner(compiled.path("control_flow", "llvm-cpu"))
    capture = TensorCapture(TensorStore(memory_limit_bytes=4096, spill_dir=tmp_path))
    runner.device.observers.append(capture)
    n = 100  # 3 * 2^100 is still a finite f32
    result = runner.invoke("repeat_double", parse_inputs(["4xf32=1 -2 0.5 3", str(n)], "ri"))
    # One dispatch per loop iteration doubles the vector.
    expected = (np.array([1, -2, 0.5, 3], np.float64) * 2.0**n).astype(np.float32)
    assert np.array_equal(result[0].array, expected)
    assert len(capture) >= n
    stats = capture.store.stats()
    assert stats.memory_bytes <= 4096 and stats.spilled > 0
    # Dispatch k doubled the vector k+1 times: the last binding (its output) says so.
    for k in (0, 7, 60):
        record = capture.dispatch(k)
        out = capture.binding(record.sequence, record.binding_count - 1)
        doubled = np.frombuffer(np.asarray(out).tobytes()[:16], np.float32)
        assert np.array_equal(doubled, np.array([1, -2, 0.5, 3], np.float32) * np.float32(2.0 ** (k + 1)))
