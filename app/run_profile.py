"""Profile the current run into the Zones view: the open module's chosen function with its inputs, timed by
IREE's own HAL profiling (``iree-run-module --device_profiling_output``, in a child process, so a fault
cannot take the window) on the selected device, and its dispatch time by source line
(``engine.trace.by_source``). Runs on the engine worker."""

from __future__ import annotations

from typing import Any

from app.views.zones_view import LoadedTrace


def profile_run_job(
    module: str, function: str, inputs: list[str], device: str, task: Any = None, parameters: tuple[str, ...] = ()
) -> LoadedTrace:
    from engine.cli.profile import profile_reference
    from engine.trace.query import ZoneIndex
    from engine.trace.stats import zone_statistics

    if task is not None:
        task.progress(0.1, f"profiling {function} on {device}")
    trace = profile_reference(module, function, list(inputs), device, parameters=parameters)
    trace.metadata["function"] = function
    if task is not None:
        task.progress(0.6, "time by source line")
    by_source, note = attribution_of(trace, module)
    if task is not None:
        task.progress(0.8, f"{len(trace.zones):,} zones; statistics")
    return LoadedTrace(trace, ZoneIndex(trace), zone_statistics(trace), by_source, note)


def attribution_of(trace, module: str):
    """(the trace's dispatch time by source line, None) or (None, why there is none)."""
    from engine.errors import LensError
    from engine.trace.by_source import attribute, source_map

    try:
        return attribute(trace, source_map(module)), None
    except (LensError, OSError) as e:
        return None, f"no time by source line: {e}"
