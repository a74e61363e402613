"""Captured tensors stay within a memory bound; the user's session survives a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from engine.session.persist import SessionStore
from engine.session.tensor_store import TensorStore


def test_tensor_store_spills_beyond_its_memory_limit(tmp_path):
    store = TensorStore(memory_limit_bytes=64 * 1024, spill_dir=tmp_path)
    arrays = {i: np.full((1024,), i, dtype=np.float32) for i in range(100)}  # 4 KiB each, 400 KiB in all
    for i, a in arrays.items():
        store.put(("dispatch", i), a)
    stats = store.stats()
    assert stats.tensors == 100
    assert stats.memory_bytes <= 64 * 1024
    assert stats.spilled >= 84 and store.spill_path.stat().st_size == stats.spilled_bytes
    for i, a in arrays.items():  # spilled or not, every tensor reads back exactly
        assert np.array_equal(store.get(("dispatch", i)), a)
    store.discard(("dispatch", 0))
    assert ("dispatch", 0) not in store and store.stats().tensors == 99


def test_session_is_restored_after_the_application_is_killed(tmp_path):
    # A separate process saves work as it goes and is killed with SIGKILL mid-way: nothing saved is lost.
    script = textwrap.dedent(
        f"""
        import os, signal
        from engine.session.persist import SessionStore
        s = SessionStore({str(tmp_path)!r})
        s.update(module_path="/m.vmfb", breakpoints=[{{"kind": "import", "import_name": "hal.command_buffer.dispatch"}}])
        s.save_source("main_dispatch_0.mlir", "func.func @edited() {{ return }}")
        s.update(compile_options={{"target": "vmvx"}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert proc.returncode == -signal.SIGKILL
    restored = SessionStore(tmp_path)
    assert restored.has_saved_session()
    session = restored.load()
    assert session.module_path == "/m.vmfb"
    assert session.breakpoints == [{"kind": "import", "import_name": "hal.command_buffer.dispatch"}]
    assert session.compile_options == {"target": "vmvx"}
    assert restored.read_source("main_dispatch_0.mlir") == "func.func @edited() { return }"


def test_unreadable_session_file_gives_an_empty_session(tmp_path):
    store = SessionStore(tmp_path)
    store.update(function="main")
    store.session_file.write_text("{ not json")
    assert store.load().function is None
    store.session_file.write_text(json.dumps({"function": "f", "unknown_field": 1}))
    assert store.load().function == "f"


def test_integer_keys_are_indexed_compactly_and_read_back(tmp_path):
    store = TensorStore(memory_limit_bytes=1 << 20, spill_dir=tmp_path, max_in_memory=16)
    arrays = {k: np.arange(k % 7 + 1, dtype=np.int32) * k for k in range(0, 3000, 3)}
    for k, a in arrays.items():
        store.put(k, a)
    store.put(("named", 1), np.ones(3))  # a non-integer key goes through the dict
    assert not store._spilled or ("named", 1) in store
    assert len(store._int_keys) >= 900  # spilled integer keys live in flat arrays
    store.discard(9)
    assert 9 not in store and 12 in store and 10 not in store
    for k, a in arrays.items():
        if k != 9:
            assert np.array_equal(store.get(k), a)
    assert np.array_equal(store.get(("named", 1)), np.ones(3))
    assert store.stats().tensors == len(arrays)  # one discarded, one named added
