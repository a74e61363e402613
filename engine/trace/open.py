"""Open any trace file the zones view and ``iree-lens zones`` accept, by looking at its content.

* ``.ireeprof`` (IREE HAL profile bundle: read through ``iree-profile export``);
* ireeperf-jsonl (rows with ``record_type``, first a ``schema``);
* Chrome trace-event JSON (a list of events or ``{"traceEvents": ...}``);
* a compile's timing JSON (``--mlir-timing --mlir-output-format=json``, alone or at the end of stderr);
* ``.lenstrace`` (this model's own columns, ``numpy.savez``; the fast way to reopen a big trace).
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.trace.chrome import MAX_JSON_BYTES, Progress, chrome_trace_from_data, read_json
from engine.trace.compile_timing import load_compile_timing, looks_like_timing
from engine.trace.ireeprof import load_ireeperf_jsonl, load_ireeprof
from engine.trace.model import Trace, TraceFormatError
from engine.trace.native import LENSTRACE_MAGIC, load_lenstrace

IREEPROF_SUFFIXES = (".ireeprof",)


def sniff(path: str | Path) -> str:
    """The format of ``path``: ireeprof, jsonl, chrome, timing, lenstrace (or TraceFormatError)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise TraceFormatError.cannot_open(path, e) from None
    if not head:
        raise TraceFormatError("the file is empty", path=str(path))
    if head.startswith(LENSTRACE_MAGIC):
        # numpy.savez writes the first column first; a .vmfb is a zip too, and is not a trace.
        if b"zones_start.npy" in head[:128] or path.suffix == ".lenstrace":
            return "lenstrace"
        if b"module.fb" in head[:128] or path.suffix == ".vmfb":
            raise TraceFormatError(
                "a .vmfb module is not a trace (profile it with iree-lens profile)", path=str(path)
            )
        raise TraceFormatError("a zip archive that is not a .lenstrace", path=str(path))
    if path.suffix in (".mlir", ".mlirbc"):
        raise TraceFormatError(
            "a program is not a trace (profile its build with iree-lens profile, or give its compile's "
            "timing.json)", path=str(path),
        )
    if path.suffix in IREEPROF_SUFFIXES or head.lstrip()[:1] not in (b"{", b"["):
        if path.suffix in IREEPROF_SUFFIXES:
            return "ireeprof"
        text = head.decode("utf-8", errors="replace")
        if "\n[\n" in text or text.startswith("["):
            return "timing"  # iree-compile stderr with the report after diagnostics
        return "ireeprof"  # let iree-profile say whether it is one
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        first_line = stripped.split(b"\n", 1)[0]
        if b'"record_type"' in first_line:
            return "jsonl"
        return "chrome"
    return "list"  # a JSON list: Chrome events or MLIR timing; decided after parsing


def load_trace(path: str | Path, progress: Progress | None = None) -> Trace:
    """Read any supported trace file into the model (``progress`` as for Chrome JSON events)."""
    path = Path(path)
    kind = sniff(path)
    if kind == "lenstrace":
        return load_lenstrace(path)
    if kind == "ireeprof":
        return load_ireeprof(path)
    if kind == "jsonl":
        return load_ireeperf_jsonl(path)
    if kind == "timing":
        return load_compile_timing(path)
    if os.path.getsize(path) > MAX_JSON_BYTES:
        raise TraceFormatError(f"trace JSON larger than {MAX_JSON_BYTES >> 20} MiB", path=str(path))
    data = read_json(path)
    if looks_like_timing(data):
        return load_compile_timing(path)
    return chrome_trace_from_data(data, source=str(path), progress=progress)
