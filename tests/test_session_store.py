"""The user's session survives a kill; an unreadable saved session gives an empty one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from engine.session.persist import SessionStore


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
