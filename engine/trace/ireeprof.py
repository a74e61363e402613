"""IREE's HAL profiles as traces: ``ireeperf-jsonl`` rows, ``.ireeprof`` bundles, and captures.

A capture is ``iree-run-module --device_profiling_mode=... --device_profiling_output=x.ireeprof``; the
bundle is read through ``iree-profile export --format=ireeperf-jsonl`` (a subprocess with a timeout and an
output limit). What each device records (IREE 3.13):

* local-sync / local-task: ``host_execution_event`` rows (dispatch, execute, alloca...) in
  ``iree_host_time_ns``, ``command_region_event`` rows, ``queue_event`` rows;
* vulkan: ``dispatch_event`` and ``queue_device_event`` rows timed by the device (``device_tick``, with a
  derived ``driver_host_cpu_timestamp_ns``), ``queue_event`` rows in ``iree_host_time_ns``.

Every time is put on the ``iree_host_time_ns`` axis: device times through the ``clock_correlation`` rows
(a line through the first and last sample, as iree-profile's own clock fit), then the trace is rebased so
its first event is at 0. Dispatch zones get category ``dispatch``, are named by their export (IREE's
``key``) and carry ``ordinal`` (their order in the run), ``executable``, ``export_ordinal`` and
``workgroup_count``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.trace.model import Trace, TraceBuilder, TraceFormatError

EXPORT_TIMEOUT_S = 120.0
MAX_JSONL_BYTES = 1 << 30

PROFILING_MODES = {
    "local": "queue-events,host-execution,command-region-events,executable-metadata",
    "vulkan": "queue-events,device-queue-events,dispatch-events,executable-metadata",
}


def iree_tool(name: str) -> str:
    """One of IREE's tools: beside this interpreter (the venv) first, then on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise TraceFormatError(f"IREE's {name} is not installed (looked beside {sys.executable} and on PATH)")
    return found


def profiling_mode_for(device: str) -> str:
    """The profiling families a device supports (IREE 3.13): Vulkan has device timestamps, CPU host times."""
    return PROFILING_MODES["vulkan" if device.split(":")[0].startswith("vulkan") else "local"]


class _ClockFit:
    """Maps a device's ``driver_host_cpu_timestamp_ns`` and ``device_tick`` to ``iree_host_time_ns``."""

    def __init__(self) -> None:
        self.samples: dict[int, list[tuple[int, int, int]]] = {}

    def add(self, row: dict) -> None:
        host = (int(row["host_time_begin_ns"]) + int(row["host_time_end_ns"])) // 2
        self.samples.setdefault(int(row.get("physical_device_ordinal", 0)), []).append(
            (int(row.get("host_cpu_timestamp_ns", 0)), int(row.get("device_tick", 0)), host)
        )

    def _map(self, device: int, value: int, column: int) -> int:
        s = self.samples.get(device)
        if not s:
            return value  # no correlation: the device clock is taken as the host clock
        (a, b) = (s[0], s[-1])
        if b[column] == a[column]:
            return value + a[2] - a[column]
        slope = (b[2] - a[2]) / (b[column] - a[column])
        return int(round(a[2] + (value - a[column]) * slope))

    def cpu(self, device: int, value: int) -> int:
        return self._map(device, value, 0)

    def tick(self, device: int, value: int) -> int:
        return self._map(device, value, 1)


def trace_from_jsonl_rows(rows: Iterable[dict], source: str = "") -> Trace:
    """Build a trace from ireeperf-jsonl rows (already parsed)."""
    rows = list(rows)
    clock = _ClockFit()
    functions: dict[tuple[int, int], str] = {}
    device_dispatch = False
    for k, r in enumerate(rows):
        rt = r.get("record_type")
        try:
            if rt == "clock_correlation":
                clock.add(r)
            elif rt == "executable_function":
                functions[(int(r["executable_id"]), int(r["function_ordinal"]))] = str(r.get("name", ""))
            elif rt == "dispatch_event":
                device_dispatch = True
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise TraceFormatError(
                f"row {k} ({rt}) is malformed: {type(e).__name__}: {e}", path=source or None
            ) from None
    b = TraceBuilder(source)
    dispatches: list[tuple[int, int, int, str, dict]] = []  # start, end, track, name, args

    def queue_track(r: dict, what: str, kind: str) -> int:
        # Named as iree-profile names them (device[0], queue[0]); the profile records no device name (the HAL
        # device it ran on is the capture's --device: ``metadata["device"]`` where the caller knows it).
        dev, q = int(r.get("physical_device_ordinal", 0)), int(r.get("queue_ordinal", 0))
        return b.track((what, dev, q), f"{what}, queue[{q}]", kind, f"device[{dev}]")

    for k, r in enumerate(rows):
        rt = r.get("record_type")
        try:
            if rt == "host_execution_event":
                start, end = int(r["start_host_time_ns"]), int(r["end_host_time_ns"])
                op = str(r.get("op", ""))
                if op == "dispatch":
                    if device_dispatch:
                        continue  # the device's own timestamps are the dispatch zones
                    t = queue_track(r, "host execution", "queue")
                    dispatches.append((start, end, t, _dispatch_name(r, functions), _dispatch_args(r)))
                else:
                    b.add_zone(
                        start, end, queue_track(r, "host execution", "queue"), op, "queue", _queue_args(r)
                    )
            elif rt == "dispatch_event":
                dev = int(r.get("physical_device_ordinal", 0))
                start, end = _device_times(r, clock, dev)
                t = queue_track(r, "device queue", "device")
                dispatches.append((start, end, t, _dispatch_name(r, functions), _dispatch_args(r)))
            elif rt == "queue_device_event":
                dev = int(r.get("physical_device_ordinal", 0))
                start, end = _device_times(r, clock, dev)
                b.add_zone(
                    start,
                    end,
                    queue_track(r, "device queue", "device"),
                    str(r.get("op", "")),
                    "queue",
                    _queue_args(r),
                )
            elif rt == "command_region_event":
                start, end = int(r["start_host_time_ns"]), int(r["end_host_time_ns"])
                b.add_zone(
                    start,
                    end,
                    queue_track(r, "command regions", "queue"),
                    "command region",
                    "region",
                    {
                        "command_buffer_id": r.get("command_buffer_id"),
                        "dispatches": r.get("region_dispatch_count"),
                    },
                )
            elif rt == "queue_event":
                t = queue_track(r, "queue operations", "queue")
                b.add_instant(int(r["host_time_ns"]), t, str(r.get("op", "")), _queue_args(r))
            elif rt == "memory_event":
                t = b.track(("memory",), "memory", "device", "memory")
                time = r.get("host_time_ns")
                if time is not None:
                    b.add_instant(
                        int(time), t, str(r.get("event_type", "memory")), {"length": r.get("length")}
                    )
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise TraceFormatError(
                f"row {k} ({rt}) is malformed: {type(e).__name__}: {e}", path=source or None
            ) from None
    # Ordinals follow the order the program issued them (submission, then place in the command buffer),
    # which on a multi-worker device can differ from the order they started in.
    dispatches.sort(
        key=lambda d: (_int_or(d[4].get("submission_id")), _int_or(d[4].get("command_index")), d[0], d[1])
    )
    for ordinal, (start, end, t, name, args) in enumerate(dispatches):
        b.add_zone(start, end, t, name, "dispatch", {"ordinal": ordinal, **args})
    b.metadata["kind"] = "ireeprof"
    b.metadata["dispatch_time"] = "device" if device_dispatch else "host"
    try:
        return b.build(rebase=True)
    except OverflowError:
        raise TraceFormatError("a time does not fit in 64-bit nanoseconds", path=source or None) from None


def _int_or(v: object, default: int = 0) -> int:
    return v if isinstance(v, int) else default


def _device_times(r: dict, clock: _ClockFit, dev: int) -> tuple[int, int]:
    # The start moves onto the host axis; the duration stays IREE's own (from its device clock fit).
    if r.get("derived_time_available") and "start_driver_host_cpu_time_ns" in r:
        start = clock.cpu(dev, int(r["start_driver_host_cpu_time_ns"]))
        end = clock.cpu(dev, int(r["end_driver_host_cpu_time_ns"]))
    else:
        start, end = clock.tick(dev, int(r["start_tick"])), clock.tick(dev, int(r["end_tick"]))
    if r.get("duration_ns") is not None:
        end = start + int(r["duration_ns"])
    return start, end


def _dispatch_name(r: dict, functions: dict) -> str:
    key = r.get("key")
    if key:
        return str(key)
    return functions.get((int(r.get("executable_id", 0)), int(r.get("function_ordinal", 0))), "dispatch")


def _dispatch_args(r: dict) -> dict:
    return {
        "executable": int(r.get("executable_id", 0)),
        "export_ordinal": int(r.get("function_ordinal", 0)),
        "workgroup_count": list(r.get("workgroup_count") or ()),
        "workgroup_size": list(r.get("workgroup_size") or ()),
        "submission_id": r.get("submission_id"),
        "command_buffer_id": r.get("command_buffer_id"),
        "command_index": r.get("command_index"),
    }


def _queue_args(r: dict) -> dict:
    return {k: r[k] for k in ("submission_id", "command_buffer_id", "operation_count") if k in r}


def parse_jsonl(text_lines: Iterable[str], source: str = "") -> list[dict]:
    rows = []
    for n, line in enumerate(text_lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise TraceFormatError(f"line {n} is not JSON ({e})", path=source or None) from None
        if not isinstance(row, dict) or "record_type" not in row:
            raise TraceFormatError(
                f"line {n} is not an ireeperf-jsonl record (no record_type)", path=source or None
            )
        rows.append(row)
    if not rows or rows[0].get("record_type") != "schema":
        raise TraceFormatError(
            "not ireeperf-jsonl: the first row is not a schema record", path=source or None
        )
    return rows


def load_ireeperf_jsonl(path: str | Path, max_bytes: int = MAX_JSONL_BYTES) -> Trace:
    path = Path(path)
    try:
        if os.path.getsize(path) > max_bytes:
            raise TraceFormatError(f"JSONL larger than {max_bytes >> 20} MiB", path=str(path))
        with open(path, encoding="utf-8", errors="replace") as f:
            rows = parse_jsonl(f, str(path))
    except OSError as e:
        raise TraceFormatError(f"cannot read: {e.strerror}", path=str(path)) from None
    return trace_from_jsonl_rows(rows, str(path))


def export_ireeprof(
    path: str | Path, timeout_s: float = EXPORT_TIMEOUT_S, max_bytes: int = MAX_JSONL_BYTES
) -> list[dict]:
    """Rows of ``iree-profile export --format=ireeperf-jsonl path`` (bounded in time and size)."""
    path = Path(path)
    if not path.is_file():
        raise TraceFormatError("no such .ireeprof file", path=str(path))
    with tempfile.TemporaryDirectory(prefix="lens-ireeprof-") as d:
        out = Path(d) / "export.jsonl"
        try:
            proc = subprocess.run(
                [
                    iree_tool("iree-profile"),
                    "export",
                    "--format=ireeperf-jsonl",
                    f"--output={out}",
                    str(path),
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise TraceFormatError(
                f"iree-profile export took longer than {timeout_s:g} s", path=str(path)
            ) from None
        if proc.returncode != 0 or not out.exists():
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise TraceFormatError(
                f"iree-profile cannot read it: {msg[-1] if msg else f'exit status {proc.returncode}'}",
                path=str(path),
            )
        if out.stat().st_size > max_bytes:
            raise TraceFormatError(f"exported JSONL larger than {max_bytes >> 20} MiB", path=str(path))
        with open(out, encoding="utf-8", errors="replace") as f:
            return parse_jsonl(f, str(path))


def load_ireeprof(path: str | Path, timeout_s: float = EXPORT_TIMEOUT_S) -> Trace:
    """Open a ``.ireeprof`` bundle (through ``iree-profile export``)."""
    return trace_from_jsonl_rows(export_ireeprof(path, timeout_s), str(path))


def capture_ireeprof(
    module: str | Path,
    function: str,
    inputs: Sequence[str],
    out: str | Path,
    device: str = "local-task",
    mode: str | None = None,
    timeout_s: float = 600.0,
    extra_flags: Sequence[str] = (),
    repeat: int = 1,
    modules: Sequence[str | Path] = (),
) -> subprocess.CompletedProcess:
    """Run ``iree-run-module`` with HAL profiling, writing ``out`` (.ireeprof). Raises on failure.

    With ``repeat`` > 1, ``iree-benchmark-module`` calls the function exactly ``repeat`` times in one
    process (``--benchmark_min_time=Nx``), so the module's initializer runs once, as in a debug run.
    ``modules``: the compiled modules the program calls, registered before it (``--module``, in order)."""
    from engine.runtime.hal.executable_plugins import iree_runtime_flags

    tool = "iree-run-module"
    if repeat > 1:
        tool = "iree-benchmark-module"
        extra_flags = [f"--benchmark_min_time={repeat}x", "--benchmark_repetitions=1", *extra_flags]
    cmd = [
        iree_tool(tool),
        *[f"--module={m}" for m in modules],
        f"--module={module}",
        f"--device={device}",
        f"--function={function}",
        *[f"--input={i}" for i in inputs],
        f"--device_profiling_mode={mode or profiling_mode_for(device)}",
        f"--device_profiling_output={out}",
        *iree_runtime_flags(),  # the executable plugins this process registered
        *extra_flags,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TraceFormatError(f"{tool} did not finish in {timeout_s:g} s") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise TraceFormatError(f"{tool} failed: {' '.join(lines[-3:]) if lines else proc.returncode}")
    return proc
