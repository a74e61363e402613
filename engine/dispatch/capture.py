"""``capture``: run a program on either engine and write its golden bundle (see ``bundle``).

The debug engine sees every dispatch through the HAL's dispatch snapshots (``DispatchRecorder``), typed
by the executables' sources when known (given, or beside the module); IREE's runtime
only through the trace points of a module compiled with ``--iree-flow-trace-dispatch-tensors``, which it
reports to a ``HalModuleDebugSink``. Both write the same manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import BUNDLE_PROVENANCE, BundleWriter, DispatchEntry, executable_of
from engine.dispatch.debug_capture import (
    DispatchRecorder,
    health_of,
    module_has_trace_points,
    parse_trace_key,
)
from engine.dispatch.tensor_types import BindingInterface, TensorType, view_bytes
from engine.dispatch.trace_pairing import TracePairing, heads_without_inputs
from engine.dispatch.typed_tensors import ExecutableSources, Provenance, find_sources
from engine.errors import LensError
from engine.runtime.function_io import (
    Scalar,
    Storage,
    Tensor,
    Value,
    format_shape_and_type,
    parse_inputs,
    split_cconv,
)
from engine.runtime.parameters import ParameterArchives
from engine.runtime.reference import ReferenceRunner


class CaptureError(LensError):
    """A capture could not be made (no trace points for the reference engine, a failed run...)."""


@dataclass(frozen=True)
class CaptureResult:
    directory: Path
    dispatches: int
    results: list[Value]
    bytes_written: int
    initializer_dispatches: int = 0  # what the module's initializer ran before the call (not captured)
    notes: tuple[str, ...] = ()  # what the user asked that the capture could not do (a --type that did not fit)


def _write_program_values(writer: BundleWriter, kind: str, values: list[Value]) -> None:
    names, types = [], []
    for i, v in enumerate(values):
        if isinstance(v, Tensor):
            array = v.array
            tt = TensorType(tuple(v.shape), v.element_type.name, Provenance.RUNTIME)
            array, tt = view_bytes(array, tt)
        elif isinstance(v, Scalar):
            array = np.array(
                v.value, dtype={"i32": np.int32, "i64": np.int64, "f32": np.float32}.get(v.kind, np.float64)
            )
            tt = TensorType((), v.kind, Provenance.RUNTIME)
        elif isinstance(v, Storage):  # a buffer the function fills (its transients): given again by its size
            spec = "&" + format_shape_and_type(v.tensor.shape, v.tensor.element_type.name)
            names.append(spec)
            types.append(spec)
            continue
        else:
            continue  # opaque refs have no data
        name, text = writer.write_tensor(f"{kind[:-1]}_{i}", array, tt)
        names.append(name)
        types.append(text)
    writer.manifest[kind] = names
    writer.manifest[f"{kind[:-1]}_types"] = types


def capture_debug(
    module: str | Path,
    function: str,
    input_specs: list[str],
    out: str | Path,
    *,
    device: str = "local-sync",
    sources: ExecutableSources | None = None,
    overrides: dict | None = None,
    on_dispatch: Callable[[DispatchEntry], None] | None = None,
    interfaces: dict[str, dict[int, BindingInterface]] | None = None,
    parameters: ParameterArchives | None = None,
    calls_before: Sequence[tuple[str, Sequence[str]]] = (),
    modules: Sequence[str] = (),
) -> CaptureResult:
    """Run ``function`` on the debug engine, every dispatch observed, and write the bundle to ``out``.

    ``calls_before``: ``(function, input specs)`` called first on the same module instance, not captured (a
    stateful program's earlier calls: what its globals hold when ``function`` is called).

    ``sources`` type the tensors (``typed_tensors.read_sources``); by default those found beside the module
    (``find_sources``); without any, each binding is captured as exactly its bytes. ``interfaces``: already
    parsed sources (``tensor_types.interfaces_from_files``), the same as ``sources``. The module's initializer
    (``__init``) as ``function`` runs as the call, not as the module loads: its dispatches are the call's."""
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner
    from engine.runtime.hal.devices import create_device
    from engine.runtime.hal.module import HalModule

    if sources is None and interfaces:
        sources = ExecutableSources(interfaces, "given")
    if sources is None:
        sources = find_sources(module)
    with BundleWriter(out, module=str(module), function=function, engine="debug", device=device) as writer:
        writer.manifest["sources"] = {"origin": sources.origin, "path": sources.path}
        recorder = DispatchRecorder(writer, sources, overrides)
        if on_dispatch is not None:

            def added(entry: DispatchEntry) -> None:
                writer.wait_written()  # whoever is told can read the dispatch's files
                on_dispatch(entry)

            writer.dispatch_listeners.append(added)
        hal_device = create_device(device)
        snapshots = recorder.attach(hal_device)
        try:
            recorder.in_initializer()
            runner = DebugRunner(module, device, hal_module=HalModule(hal_device, trace_sink=recorder.trace),
                                 parameters=parameters, run_init=function != INITIALIZER, modules=tuple(modules))
            initializer_dispatches = recorder.initializer_dispatches
            _call_first(runner, writer, function, calls_before)  # followed as the initializer is, not written
            args = parse_inputs(input_specs, split_cconv(runner.cconv(function))[0])
            _write_program_values(writer, "inputs", args)
            recorder.start_call(hal_device.dispatch_count)
            writer.manifest["initializer_dispatches"] = initializer_dispatches
            try:
                results = runner.invoke(function, args)
            except LensError as e:
                recorder.flush()
                raise _failed_run(writer, e) from e
            recorder.flush()
        finally:
            snapshots.unsubscribe(recorder)
        _write_program_values(writer, "outputs", results)
        notes = tuple(recorder.override_notes())
        writer.finish(extra={"notes": list(notes)} if notes else None)
        return CaptureResult(
            writer.directory, writer.dispatch_count, results, writer.bytes_written, initializer_dispatches, notes,
        )  # fmt: skip


NO_TRACE_POINTS = (
    "{module} has no dispatch trace points: IREE's runtime shows a dispatch's tensors only at trace points; "
    "recompile with --iree-flow-trace-dispatch-tensors, or capture with --engine=debug (no flags needed)"
)


def capture_reference(
    module: str | Path,
    function: str,
    input_specs: list[str],
    out: str | Path,
    *,
    device: str = "local-sync",
    on_dispatch: Callable[[DispatchEntry], None] | None = None,
    parameters: ParameterArchives | None = None,
    calls_before: Sequence[tuple[str, Sequence[str]]] = (),
    modules: Sequence[str] = (),
) -> CaptureResult:
    """Run ``function`` on IREE's runtime and write the bundle from its trace points; ``calls_before`` as
    ``capture_debug`` takes them."""
    if not module_has_trace_points(module):
        raise CaptureError(NO_TRACE_POINTS.format(module=module))
    with BundleWriter(out, module=str(module), function=function, engine="reference", device=device) as writer:
        # The initializer's trace points (while the runner loads) are counted, not written: the bundle's
        # dispatches are the call's, numbered from its first as the debugger numbers them.
        state: dict = {"errors": [], "calling": False, "initializer": 0, "ambiguous": []}
        runner_box: list[ReferenceRunner] = []
        # IREE's stream scheduling can trace a dispatch's inputs after its outputs (EfficientViT: the outputs
        # of two dispatches, two other dispatches whole, then those two's inputs): each dispatch pairs its own
        # trace points (``TracePairing``, as the reference debugger numbers them).
        without_inputs = heads_without_inputs(str(module))
        pairing = TracePairing(without_inputs)
        held = _HeldEntries(writer, on_dispatch)

        def sink(key: str, buffer_views: list) -> None:
            try:
                if not state["calling"]:
                    state["initializer"] += key.endswith(" outputs")
                    return
                runner = runner_box[0]
                executable, export, kind = parse_trace_key(key)
                head = key.rpartition(" ")[0]
                arrays, types = [], []
                for bv in buffer_views:
                    array = _map_buffer_view(runner, bv)
                    from engine.runtime.element_types import ElementType

                    tt = TensorType(
                        tuple(int(d) for d in bv.shape), ElementType(int(bv.element_type)).name, Provenance.RUNTIME
                    )
                    array, tt = view_bytes(array, tt)
                    arrays.append(array)
                    types.append(tt)
                if kind not in ("inputs", "outputs"):
                    return
                ordinal, _ = pairing.take(head, kind, [])  # the tensors are written now: none are kept
                entry = held.entry(ordinal, export, executable)
                if kind == "inputs" and ordinal in pairing.ambiguous:
                    # Its outputs came, then another run's of the same export, before either's inputs: which
                    # inputs are whose is a guess, so none are written (said in the notes).
                    state["ambiguous"].append(ordinal)
                    whole = True
                elif kind == "inputs":
                    entry.inputs, entry.input_types = _write(writer, ordinal, "input", arrays, types)
                    whole = bool(entry.outputs)  # its outputs came first
                else:
                    entry.outputs, entry.output_types = _write(writer, ordinal, "output", arrays, types)
                    # An output kept as raw bytes (complex, i4: no numpy view here) has no values to judge.
                    entry.health = "-" if any(t.source == "raw" for t in types) else health_of(arrays)
                    whole = bool(entry.inputs) or head in without_inputs
                if whole:
                    held.complete(ordinal)
            except Exception as e:  # an exception must not cross into IREE's runtime
                state["errors"].append(f"{key}: {e}")

        import iree.runtime as rt

        # ReferenceRunner keeps the sink alive as long as its HAL module uses it (its ``debug_sink`` field).
        runner = ReferenceRunner(module, device, debug_sink=rt.HalModuleDebugSink(sink), parameters=parameters,
                                 modules=list(modules))  # fmt: skip
        runner_box.append(runner)
        writer.manifest["initializer_dispatches"] = state["initializer"]
        _call_first(runner, writer, function, calls_before)  # their trace points are not written
        args = parse_inputs(input_specs, split_cconv(runner.cconv(function))[0])
        _write_program_values(writer, "inputs", args)
        state["calling"] = True
        try:
            results = runner.invoke(function, args)  # IREE calls the sink on this thread
        except LensError as e:
            held.finish()
            raise _failed_run(writer, e) from e
        finally:
            runner_box.clear()  # the sink refers to the runner: break the cycle so IREE's objects die in order
        del runner
        unpaired = held.finish()
        if state["errors"]:
            raise CaptureError("reading trace points failed: " + "; ".join(state["errors"][:3]))
        if not writer.dispatch_count:
            raise CaptureError(NO_TRACE_POINTS.format(module=module) + f" (none reached by {function})")
        _write_program_values(writer, "outputs", results)
        notes = _pairing_notes(unpaired, state["ambiguous"])
        writer.finish(extra={"notes": list(notes)} if notes else None)
        return CaptureResult(
            writer.directory, writer.dispatch_count, results, writer.bytes_written, state["initializer"], notes
        )


def _pairing_notes(unpaired: list[int], ambiguous: list[int]) -> tuple[str, ...]:
    """What the manifest says of dispatches written without their inputs: ``unpaired``, whose inputs IREE never
    traced; ``ambiguous``, whose inputs came after their outputs while another run of the same export also
    waited for its inputs (``TracePairing.ambiguous``)."""

    def shown(ordinals: list[int]) -> str:
        ordinals = sorted(ordinals)
        return ", ".join(str(o) for o in ordinals[:12]) + (", ..." if len(ordinals) > 12 else "")

    debug = "(the debug engine captures their bound bytes)"
    notes = []
    if unpaired:
        notes.append(f"IREE traced the outputs of {len(unpaired)} dispatches and never their inputs (dispatches "
                     f"{shown(unpaired)}): their inputs are not in the bundle {debug}")  # fmt: skip
    if ambiguous:
        notes.append(f"IREE traced the inputs of {len(ambiguous)} dispatches after their outputs, while another run "
                     f"of the same export also waited for its inputs (dispatches {shown(ambiguous)}): which inputs "
                     f"are whose is not known, so theirs are not in the bundle {debug}")  # fmt: skip
    return tuple(notes)


class _HeldEntries:
    """Reference capture entries held until both halves of their dispatch are written, then added to the bundle
    in dispatch order (a dispatch whose inputs IREE traces after its outputs holds back the ones after it)."""

    def __init__(self, writer: BundleWriter, on_dispatch: Callable[[DispatchEntry], None] | None):
        self.writer = writer
        self.on_dispatch = on_dispatch
        self.entries: dict[int, DispatchEntry] = {}  # by ordinal, until added
        self.whole: set[int] = set()
        self.next = 0  # the next ordinal to add

    def entry(self, ordinal: int, export: str, executable: str | None) -> DispatchEntry:
        entry = self.entries.get(ordinal)
        if entry is None:
            entry = self.entries[ordinal] = DispatchEntry(ordinal, export, executable or executable_of(export), None)
            entry.tensors_from = BUNDLE_PROVENANCE[Provenance.RUNTIME]
        return entry

    def complete(self, ordinal: int) -> None:
        """Both halves of ``ordinal`` are written: add it, and the whole ones it held back."""
        self.whole.add(ordinal)
        while self.next in self.whole:
            self.whole.discard(self.next)
            self._add(self.entries.pop(self.next))
            self.next += 1

    def finish(self) -> list[int]:
        """Add what the run left held, in order: a dispatch whose outputs came and inputs never did is added
        without inputs (its ordinal returned, to be said); one whose outputs never came (the run failed in it)
        is not."""
        unpaired = [o for o in sorted(self.entries) if self.entries[o].outputs and o not in self.whole]
        for ordinal in sorted(self.entries):
            entry = self.entries.pop(ordinal)
            if entry.outputs:
                self._add(entry)
        self.whole.clear()
        return unpaired

    def _add(self, entry: DispatchEntry) -> None:
        self.writer.add_dispatch(entry)
        if self.on_dispatch is not None:
            self.writer.wait_written()
            self.on_dispatch(entry)


def _call_first(runner, writer: BundleWriter, function: str, calls_before) -> None:
    """The calls the module instance runs before the captured one (a stateful program's state), kept in the
    manifest (``Bundle.calls_before``); one that fails ends the capture, named."""
    for k, (earlier, specs) in enumerate(calls_before, 1):
        try:
            runner.invoke(earlier, parse_inputs(list(specs), split_cconv(runner.cconv(earlier))[0]))
        except LensError as e:
            writer.finish(extra={"error": f"earlier call {k} ({earlier}): {e}"})
            raise CaptureError(f"call {k} of the {len(calls_before)} before {function} ({earlier}) failed: {e}") from e
    if calls_before:
        writer.manifest["calls_before"] = [[f, list(specs)] for f, specs in calls_before]


def _failed_run(writer: BundleWriter, error: LensError) -> CaptureError:
    """Keep what a failed run captured (the dispatches up to the failure, with the error in the manifest)
    and say so; the bundle opens like any other."""
    writer.finish(extra={"error": str(error)})
    return CaptureError(
        f"the run failed after {writer.dispatch_count} dispatches: {error}\n"
        f"the dispatches before the failure are in {writer.directory}"
    )


def _map_buffer_view(runner: ReferenceRunner, bv) -> np.ndarray:
    """The buffer view's bytes without a copy where the memory maps (valid while the sink runs: the
    tensor is written out before it returns); a staging copy otherwise (Vulkan)."""
    from engine.runtime.element_types import ElementType

    element = ElementType(int(bv.element_type))
    try:
        raw = bv.map().asarray([int(bv.byte_length)], np.dtype(np.uint8))
    except RuntimeError:
        return runner.read_buffer_view(bv)
    if element.packed:  # i4, ui2...: several elements a byte; kept as the bytes they are (typed as raw bytes)
        return np.asarray(raw)
    return np.asarray(raw).view(element.dtype).reshape(tuple(bv.shape))


def _write(writer: BundleWriter, ordinal: int, kind: str, arrays, types) -> tuple[list[str], list[str]]:
    names, texts = [], []
    for position, (array, tt) in enumerate(zip(arrays, types)):
        name, text = writer.write_tensor(f"d{ordinal:05d}_{kind}{position}", array, tt)
        names.append(name)
        texts.append(text)
    return names, texts
