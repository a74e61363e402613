"""What several benchmarks share: a sample compiled with IREE's executable dumps, an edited source, and a
collector of session events. Benchmarks import only the project's packages and this module, so each one
runs from a fresh clone after the README's set-up (``.venv/bin/python benchmarks/NAME.py``)."""

from __future__ import annotations

import queue
import re
import subprocess
from pathlib import Path

from engine.compiler.targets import TARGETS, target_flags
from engine.samples import sample_path
from engine.trace.ireeprof import iree_tool

# The benchmarks' target words, as IREE Lens names its targets.
TARGET_NAMES = {"cpu": "llvm-cpu", "vulkan": "vulkan-spirv", "vmvx": "vmvx"}


def compile_sample(sample: str, target: str, out: Path) -> Path:
    """A bundled sample compiled by iree-compile for ``target`` (IREE Lens's target names) to ``out``."""
    subprocess.run([iree_tool("iree-compile"), str(sample_path(sample)), *target_flags(target), "-o", str(out)],
                   check=True)  # fmt: skip
    return out


def compile_with_dumps(sample: str, target: str, out: Path) -> Path:
    """Compile a bundled sample for ``target`` (cpu, vulkan, vmvx), dumping executable sources,
    intermediates (.ll, .spirv) and binaries under ``out``; reuses a module compiled there before."""
    out.mkdir(parents=True, exist_ok=True)
    vmfb = out / f"{sample}.vmfb"
    if not vmfb.exists():
        dumps = [f"--iree-hal-dump-executable-{kind}-to={out / kind}" for kind in ("sources", "intermediates", "binaries")]
        flags = TARGETS[TARGET_NAMES[target]].flags
        subprocess.run([iree_tool("iree-compile"), str(sample_path(sample)), *flags, "-o", str(vmfb), *dumps],
                       check=True, capture_output=True)  # fmt: skip
    return vmfb


def edited_source(sources: Path, out: Path) -> Path:
    """The dumped MLIR source of main_dispatch_0 with its final ``addf`` made a ``mulf``."""
    text = (sources / "module_main_dispatch_0.mlir").read_text()
    edited, n = re.subn(r"arith\.addf (%\w+), (%\w+) : f32", r"arith.mulf \1, \2 : f32", text)
    if n != 1:
        raise RuntimeError(f"expected one f32 addf in main_dispatch_0, found {n}")
    out.write_text(edited)
    return out


class Events:
    """A session's event callback that queues events; ``next()`` waits for the next one."""

    def __init__(self):
        self._queue: queue.Queue = queue.Queue()

    def __call__(self, event) -> None:
        self._queue.put(event)

    def next(self, timeout: float = 60.0):
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no session event within {timeout} s") from None
