"""Opening a file in a bounded child process: plain data back, or a clear error for a damaged file, a
hang, memory past the limit, or a cancel; the caller is never held longer than the limit."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from engine.runtime.vmfb.isolated import (
    BoundedCall,
    BoundedCallError,
    CallLimits,
    read_module_summary,
)


def call_bounded(fn, *args, limits: CallLimits):
    """``fn(*args)`` in a child process under ``limits``, waited for as the window's module loader does."""
    return BoundedCall(fn, *args, limits=limits).result()


def test_a_module_summary_comes_back_as_plain_data(compiled):
    path = compiled.path("softmax", "vmvx")
    summary = call_bounded(read_module_summary, str(path), limits=CallLimits(seconds=120))
    expected = json.loads(
        subprocess.run(
            [sys.executable, "-m", "app.launcher", "inspect", str(path), "--output=json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert json.loads(json.dumps(summary, default=str)) == expected


def test_a_damaged_module_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.vmfb"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(BoundedCallError) as e:
        call_bounded(read_module_summary, str(bad), limits=CallLimits(seconds=120))
    assert e.value.kind == "error" and e.value.error_type == "VmfbFormatError"
    assert str(e.value)


def test_time_and_memory_limits_and_cancel():
    with pytest.raises(BoundedCallError) as e:
        call_bounded(time.sleep, 60, limits=CallLimits(seconds=3))
    assert e.value.kind == "timeout"
    with pytest.raises(BoundedCallError) as e:
        call_bounded(bytearray, 8 << 30, limits=CallLimits(seconds=60, memory_bytes=512 << 20))
    assert e.value.kind == "memory" and "512 MiB" in str(e.value)
    call = BoundedCall(time.sleep, 60, limits=CallLimits(seconds=60))
    threading.Timer(0.5, call.cancel).start()
    start = time.perf_counter()
    with pytest.raises(BoundedCallError) as e:
        call.result()
    assert e.value.kind == "cancelled" and time.perf_counter() - start < 30
