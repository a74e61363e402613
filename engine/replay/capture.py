"""``iree-lens capture RUN.ireereplay``: reissue a replay on the debug engine's HAL and write the same
bundle as a module capture (``engine/dispatch/bundle.py``): every dispatch in execution order, named by
IREE's export names, its input and output tensors typed as for a module without sources (IREE's
dispatch name, SPIR-V declarations on Vulkan), through the same ``DispatchRecorder``.

A replay has no function signature: the bundle's program ``outputs`` are the bytes of the buffers the
host mapped for reading at the end of the run (raw ``u8``, the types are not in the capture), its
``inputs`` those the host wrote in the ``execute`` scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.dispatch.bundle import BundleWriter
from engine.dispatch.debug_capture import DispatchRecorder
from engine.dispatch.tensor_types import raw_type
from engine.replay import format as f
from engine.replay.execute import ReplayExecutor, Substitution
from engine.replay.payloads import BufferRange, BufferRangeData, ExecutablePrepare, ScopePayload
from engine.replay.reader import Record, ReplayFile, open_replay
from engine.replay.trace_capture import TracedReplayRecorder, host_reads, is_traced, map_repeat
from engine.runtime.hal.devices import create_device

P = f.PayloadType
MAP_READ = 0x1  # IREE_HAL_MEMORY_ACCESS_READ


@dataclass(frozen=True)
class ReplayCaptureResult:
    directory: Path
    dispatches: int
    bytes_written: int
    notes: tuple[str, ...] = ()  # what the user asked that the capture could not do (a --type that did not fit)


def replay_binding_elements(replay: ReplayFile) -> dict[str, dict[int, str]]:
    """Export name -> binding -> SPIR-V element type, for the Vulkan executables a replay captured."""
    from engine.dispatch.spirv_types import binding_elements
    from engine.runtime.vmfb.vke1 import is_vke1, read_vke1

    found: dict[str, dict[int, str]] = {}
    for r in replay.records():
        if (
            r.operation_code != f.OP["executable_cache.prepare_executable"]
            or r.payload_type != P.EXECUTABLE_PREPARE
        ):
            continue
        data = bytes(replay.range_bytes(replay.decode_as(r, ExecutablePrepare).data_range))
        try:
            if not is_vke1(data):
                continue
            vke1 = read_vke1(data)
            for p in vke1.pipelines:
                if p.shader_module_ordinal < len(vke1.shader_modules):
                    found[p.entry_point] = binding_elements(
                        vke1.shader_modules[p.shader_module_ordinal].spirv
                    )
        except Exception:  # noqa: BLE001 - typing is best effort; one unreadable executable leaves others typed
            continue
    return found


class _HostTraffic:
    """Notes which buffers the host wrote (inputs) and mapped for reading (outputs) while replaying."""

    def __init__(self, replay: ReplayFile):
        self.replay = replay
        self.written: list = []  # FileRange of each block of bytes the host wrote
        self.read: list[tuple[int, int, int]] = []
        self.scope: list[str] = []
        self.last_read: tuple[int, int, int] | None = None  # the read mapping this record makes, if any

    def __call__(self, r: Record) -> None:
        self.last_read = None
        if r.status_code != 0 or r.record_type != f.RecordType.OPERATION:
            return
        if r.operation_code == f.OP["replay.scope_begin"] and r.payload_type == P.REPLAY_SCOPE:
            self.scope.append(self.replay.decode_as(r, ScopePayload).name)
        elif r.operation_code == f.OP["replay.scope_end"] and self.scope:
            self.scope.pop()
        elif r.operation_code == f.OP["buffer.unmap_range"] and r.payload_type == P.BUFFER_RANGE_DATA:
            if not self.scope or self.scope[-1] == "execute":
                self.written.append(self.replay.decode_as(r, BufferRangeData).data_range)
        elif r.operation_code == f.OP["buffer.map_range"] and r.payload_type == P.BUFFER_RANGE:
            mapped = self.replay.decode_as(r, BufferRange)
            entry = (r.object_id, mapped.byte_offset, mapped.byte_length)
            if mapped.memory_access == MAP_READ:
                self.last_read = entry
                if entry not in self.read:
                    self.read.append(entry)


def _write_host_buffers(writer: BundleWriter, kind: str, blocks: list[np.ndarray]) -> None:
    names, types = [], []
    for i, data in enumerate(blocks):
        # untyped bytes, in the bundle's word for them (``u8``), as the dispatches' untyped tensors say
        name, text = writer.write_tensor(f"{kind[:-1]}_{i}", data, raw_type(data.nbytes))
        names.append(name)
        types.append(text)
    writer.manifest[kind] = names
    writer.manifest[f"{kind[:-1]}_types"] = types


def capture_replay(
    path: str | Path,
    out: str | Path,
    *,
    device: str = "local-sync",
    substitutions: list[Substitution] | None = None,
    file_remap: list[tuple[str, str]] | None = None,
    interfaces: dict | None = None,
    overrides: dict | None = None,
) -> ReplayCaptureResult:
    """Replay ``path`` on the debug engine's ``device`` and write every dispatch's tensors to ``out``;
    ``interfaces`` (executable sources, ``tensor_types.interfaces_from_files``) and ``overrides`` type the
    bindings of a replay without trace points as for a module."""
    replay = open_replay(path)
    hal_device = create_device(device)
    writer = BundleWriter(out, module=str(path), function="", engine="debug-replay", device=device)
    reads = host_reads(replay)
    traced = is_traced(replay, reads) and not interfaces
    recorder: DispatchRecorder | TracedReplayRecorder
    if traced:
        recorder = TracedReplayRecorder(writer, map_repeat(reads))
    else:
        recorder = DispatchRecorder(writer, interfaces, overrides, replay_binding_elements(replay))
    traffic = _HostTraffic(replay)
    executor: ReplayExecutor

    def on_record(r: Record) -> None:
        traffic(r)
        if traced and traffic.last_read is not None:
            buffer_id, offset, length = traffic.last_read
            buffer = executor.state.buffers.get(buffer_id)
            if buffer is not None:
                base = buffer.allocated_buffer
                recorder.host_read(
                    base.allocation, base.byte_offset + offset, length, base.read_view(offset, length)
                )  # type: ignore[union-attr]

    executor = ReplayExecutor(
        replay, hal_device, substitutions=substitutions, file_remap=file_remap, on_record=on_record
    )
    # A module-style recorder subscribes to the device's snapshot observer (the bindings copied once for
    # every subscriber); the traced recorder reads IREE's trace points and watches the device itself.
    if isinstance(recorder, TracedReplayRecorder):
        hal_device.observers.append(recorder)
    else:
        snapshots = recorder.attach(hal_device)
    try:
        executor.run()
        if isinstance(recorder, TracedReplayRecorder):
            recorder.finish()
        else:
            recorder.flush()
    finally:
        if isinstance(recorder, TracedReplayRecorder):
            hal_device.observers.remove(recorder)
        else:
            snapshots.unsubscribe(recorder)
    inputs = [np.frombuffer(replay.range_bytes(r), np.uint8) for r in traffic.written]
    if isinstance(recorder, TracedReplayRecorder):
        outputs = recorder.program_outputs
    else:
        outputs = [
            np.array(executor.state.buffers[b].allocated_buffer.read_view(offset, length), copy=True)
            for b, offset, length in traffic.read
            if b in executor.state.buffers
        ]
    _write_host_buffers(writer, "inputs", inputs)
    _write_host_buffers(writer, "outputs", outputs)
    extra = {"replay": str(Path(path).resolve())}
    if substitutions:
        extra["substitutions"] = [s.to_flag() for s in substitutions]
    if not isinstance(recorder, TracedReplayRecorder):
        notes = recorder.override_notes()
    elif overrides:  # IREE's trace points type every tensor; an override has nothing to retype
        notes = ["--type does not apply to a replay of a traced build (IREE's trace points type its tensors)"]
    else:
        notes = []
    if notes:
        extra["notes"] = notes
    writer.finish(extra)
    return ReplayCaptureResult(writer.directory, writer.dispatch_count, writer.bytes_written, tuple(notes))
