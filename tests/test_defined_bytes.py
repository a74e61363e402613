"""The divergence finder's defined bytes (``lockstep.DefinedBytes``) follow the device's transfers through its
public seam (``Device.transfer_listeners``), and a queue.alloca transient is defined only where written:
concat_arguments copies two arguments (24 floats, 96 bytes) into a transient IREE rounds up to 128 bytes and
a dispatch reads all 128; the 32 bytes no copy wrote are not compared (``undefined_input_bytes``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import iree_compile

from engine.compiler.targets import target_flags
from engine.dispatch.lockstep import DefinedBytes
from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import parse_inputs, split_cconv
from engine.runtime.hal.device import Transfer

PROGRAM = Path(__file__).parent / "diverge_programs" / "concat_arguments.mlir"
INPUTS = ["16xf32=1", "8xf32=2"]


def _compile(tmp_path: Path) -> Path:
    out = tmp_path / "concat.vmfb"
    proc = iree_compile(
        [str(PROGRAM), *target_flags("llvm-cpu"), "-o", str(out)],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_transfers_reach_the_listeners_and_define_alloca_memory_only_where_written(tmp_path):
    vmfb = _compile(tmp_path)
    runner = DebugRunner(str(vmfb))
    seen: list[Transfer] = []
    defined = DefinedBytes()
    defined.attach(runner.device)
    runner.device.transfer_listeners.append(seen.append)
    runner.invoke("main", parse_inputs(INPUTS, split_cconv(runner.cconv("main"))[0]))
    # The program's two hal.command_buffer.copy_buffer: 16 floats then 8, into one transient.
    assert [(t.kind, int(t.target.offset), int(t.target.length)) for t in seen] == [("copy", 0, 64), ("copy", 64, 32)]
    target = seen[0].target.buffer
    assert target.allocation.origin == "alloca"
    size = int(target.allocation.size)
    assert size > 96  # IREE's rounding: room past the concatenation
    assert defined.ranges(target, 0, size) == [(0, 96)]  # the copies' bytes, not the alloca's padding
    defined.detach()
    assert runner.device.transfer_listeners == [seen.append]  # detached; the other listener stays


def test_the_finder_does_not_compare_the_bytes_no_transfer_wrote(tmp_path):
    vmfb = _compile(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "diverge", str(vmfb), str(vmfb), "--function=main",
         *(f"--input={i}" for i in INPUTS), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [dispatch] = json.loads(proc.stdout)["dispatches"]
    assert dispatch["verdict"] == "exact" and dispatch["inputs"] == "exact"
    assert dispatch["undefined_input_bytes"] == 128 - 96  # the transient's padding past the 24 floats
