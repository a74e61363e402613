"""What a replay contains, in the terms a debugger shows: scopes, HAL objects, host calls, executables
with their functions, and the dispatches in the order the queue ran them.

``describe_replay`` walks the records once (payloads decoded one at a time) and keeps only small
descriptions: byte ranges stay ranges into the mapped file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.replay import format as f
from engine.replay.payloads import BufferObject, Dispatch, ExecutablePrepare, QueueExecute, ScopePayload
from engine.replay.reader import BufferRef, FileRange, Record, ReplayFile

P = f.PayloadType


@dataclass
class ReplayExecutable:
    """A captured executable: object id (what ``--replay_executable_substitution=ID=`` names), format,
    binary range and the functions of its ABI metadata (IREE's export names)."""

    object_id: int
    record: int  # sequence ordinal of the prepare_executable record
    format: str
    data: FileRange
    constants: FileRange
    functions: list[str]

    def function_name(self, ordinal: int) -> str:
        return self.functions[ordinal] if 0 <= ordinal < len(self.functions) else f"#{ordinal}"


@dataclass
class ReplayDispatch:
    """One ``command_buffer.dispatch`` (or ``queue_dispatch``) as a queue ran it."""

    index: int  # execution order, from 0
    record: int  # sequence ordinal of the dispatch record
    submission: int  # sequence ordinal of the queue_execute that ran it (the dispatch itself if direct)
    command_buffer: int
    executable_id: int
    function_ordinal: int
    name: str
    workgroup_count: tuple[int, int, int]
    workgroup_count_ref: BufferRef | None
    constants: tuple[int, ...]
    bindings: list[BufferRef]  # as recorded (buffer 0 = binding-table slot)
    scope: str

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "record": self.record,
            "submission": self.submission,
            "command_buffer": self.command_buffer,
            "executable_id": self.executable_id,
            "function_ordinal": self.function_ordinal,
            "name": self.name,
            "workgroup_count": list(self.workgroup_count),
            "constants": list(self.constants),
            "bindings": [b.to_json() for b in self.bindings],
            "scope": self.scope,
        }


@dataclass
class ReplayObject:
    object_id: int
    type: str
    record: int
    scope: str
    details: dict = field(default_factory=dict)


@dataclass
class ReplayDescription:
    path: str | None
    version: tuple[int, int]
    record_count: int = 0
    scopes: list[tuple[str, int, int]] = field(default_factory=list)  # (name, begin ordinal, end ordinal)
    objects: list[ReplayObject] = field(default_factory=list)
    operations: dict[str, int] = field(default_factory=dict)  # operation name -> count
    failed_operations: list[tuple[int, str, str]] = field(default_factory=list)  # (ordinal, op, status)
    executables: list[ReplayExecutable] = field(default_factory=list)
    dispatches: list[ReplayDispatch] = field(default_factory=list)

    def executable(self, object_id: int) -> ReplayExecutable | None:
        return next((x for x in self.executables if x.object_id == object_id), None)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "version": list(self.version),
            "record_count": self.record_count,
            "scopes": [{"name": n, "begin": b, "end": e} for n, b, e in self.scopes],
            "objects": [
                {"object_id": o.object_id, "type": o.type, "record": o.record, "scope": o.scope, **o.details}
                for o in self.objects
            ],
            "operations": self.operations,
            "failed_operations": [
                {"record": r, "operation": op, "status": s} for r, op, s in self.failed_operations
            ],
            "executables": [
                {
                    "object_id": x.object_id,
                    "record": x.record,
                    "format": x.format,
                    "data_range": x.data.to_json(),
                    "functions": x.functions,
                }
                for x in self.executables
            ],
            "dispatches": [d.to_json() for d in self.dispatches],
        }


def describe_replay(replay: ReplayFile) -> ReplayDescription:
    d = ReplayDescription(replay.source, replay.version)
    scope_stack: list[tuple[str, int]] = []
    recorded: dict[int, list[tuple[Record, Dispatch]]] = {}  # command buffer id -> its dispatch records
    pending_executable: dict[int, ReplayExecutable] = {}
    for r in replay.records():
        d.record_count += 1
        scope = scope_stack[-1][0] if scope_stack else ""
        if r.record_type == f.RecordType.OBJECT:
            details = {}
            if r.object_type == f.ObjectType.BUFFER and r.payload_type == P.BUFFER_OBJECT:
                buffer = replay.decode_as(r, BufferObject)
                details = {"byte_length": buffer.byte_length, "memory_type": buffer.memory_type}
            d.objects.append(
                ReplayObject(r.object_id, r.object_type_name, r.sequence_ordinal, scope, details)
            )
            x = pending_executable.pop(r.object_id, None)
            if x is not None:
                d.executables.append(x)
            continue
        if r.record_type != f.RecordType.OPERATION:
            continue
        d.operations[r.operation] = d.operations.get(r.operation, 0) + 1
        if r.status_code != 0:
            d.failed_operations.append((r.sequence_ordinal, r.operation, r.status))
            continue
        op = r.operation_code
        if op == f.OP["replay.scope_begin"]:
            scope_stack.append((replay.decode_as(r, ScopePayload).name, r.sequence_ordinal))
        elif op == f.OP["replay.scope_end"]:
            if scope_stack:
                name, begin = scope_stack.pop()
                d.scopes.append((name, begin, r.sequence_ordinal))
        elif op == f.OP["executable_cache.prepare_executable"]:
            prepared = replay.decode_as(r, ExecutablePrepare)
            pending_executable[r.related_object_id] = ReplayExecutable(
                r.related_object_id,
                r.sequence_ordinal,
                prepared.format,
                prepared.data_range,
                prepared.constants_range,
                [fn.name for fn in prepared.functions],
            )
        elif op == f.OP["command_buffer.begin"]:
            recorded[r.object_id] = []
        elif op == f.OP["command_buffer.dispatch"]:
            recorded.setdefault(r.object_id, []).append((r, replay.decode_as(r, Dispatch)))
        elif op == f.OP["device.queue_execute"]:
            cb = replay.decode_as(r, QueueExecute).command_buffer_id
            for dr, dp in recorded.get(cb, []):
                d.dispatches.append(_dispatch(d, dr, dp, r.sequence_ordinal, cb, scope))
        elif op == f.OP["device.queue_dispatch"]:
            d.dispatches.append(_dispatch(d, r, replay.decode_as(r, Dispatch), r.sequence_ordinal, 0, scope))
    return d


def _dispatch(d: ReplayDescription, r: Record, p: Dispatch, submission: int, cb: int, scope: str) -> ReplayDispatch:
    x = d.executable(p.executable_id)
    ordinal = p.function_ordinal
    return ReplayDispatch(
        index=len(d.dispatches),
        record=r.sequence_ordinal,
        submission=submission,
        command_buffer=cb,
        executable_id=p.executable_id,
        function_ordinal=ordinal,
        name=x.function_name(ordinal) if x else f"executable {p.executable_id} #{ordinal}",
        workgroup_count=p.workgroup_count,
        workgroup_count_ref=p.workgroup_count_ref if p.indirect else None,
        constants=p.constants,
        bindings=list(p.bindings),
        scope=scope,
    )


def description_lines(d: ReplayDescription) -> list[str]:
    """A short text listing: scopes, objects by type, executables, dispatches in execution order."""
    lines = [f"IREE HAL replay v{d.version[0]}.{d.version[1]}: {d.record_count} records"]
    lines.append("scopes: " + (", ".join(f"{n} (#{b}..#{e})" for n, b, e in d.scopes) or "none"))
    counts: dict[str, int] = {}
    for o in d.objects:
        counts[o.type] = counts.get(o.type, 0) + 1
    lines.append("objects: " + ", ".join(f"{n} {t}" for t, n in counts.items()))
    lines.append("host calls: " + ", ".join(f"{op} x{n}" for op, n in d.operations.items()))
    for ordinal, op, status in d.failed_operations:
        lines.append(f"  #{ordinal} {op} failed at capture: {status}")
    lines.append(f"executables: {len(d.executables)}")
    for x in d.executables:
        lines.append(
            f"  executable {x.object_id} ({x.format}, {x.data.length} bytes): {', '.join(x.functions)}"
        )
    lines.append(f"dispatches: {len(d.dispatches)}")
    for dp in d.dispatches:
        wg = "x".join(str(v) for v in dp.workgroup_count)
        lines.append(
            f"  {dp.index:4d} {dp.name}  [{wg}]  executable {dp.executable_id}  record #{dp.record}"
            f"  {len(dp.bindings)} bindings" + (f"  scope {dp.scope}" if dp.scope else "")
        )
    return lines
