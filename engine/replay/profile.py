"""Timing zones of a replay on the debug engine: its scopes (``init``, ``execute``...) and host calls on the
host track, every dispatch on the device track (``ZoneRecorder``, as for a module's debug run)."""

from __future__ import annotations


class _Scope:
    """What ``ZoneRecorder.call`` needs to name a zone: a replay scope (init, execute, deinit)."""

    def __init__(self, name: str):
        self.name = name

    def function_name(self, ordinal: int) -> str:
        return self.name


def profile_replay(path: str, device_uri: str, repeat: int = 1):
    """Zones of the replay on the debug engine: scopes (``init``, ``execute``...) and host calls on the host
    track, every dispatch on the device track; ``repeat`` replays in one trace (a fresh device each)."""
    from engine.replay import format as f
    from engine.replay.execute import ReplayExecutor
    from engine.replay.payloads import ScopePayload
    from engine.replay.reader import open_replay
    from engine.runtime.hal.devices import create_device
    from engine.trace.recorder import ZoneRecorder

    replay = open_replay(path)
    recorder = ZoneRecorder()
    # One scope object per name, alive for the whole profile: the recorder caches names by the object's
    # id(), and a freed scope's id can be reused by the next one (which then got the wrong name).
    scopes: dict[str, _Scope] = {}
    for _ in range(repeat):
        device = create_device(device_uri)
        device.observers.append(recorder)
        recorder.device_name = device.name
        executor = ReplayExecutor(replay, device)
        for r in replay.records():
            if r.record_type != f.RecordType.OPERATION or r.status_code != 0:
                continue
            if r.operation_code == f.OP["replay.scope_begin"]:
                name = replay.decode_as(r, ScopePayload).name
                recorder.call(scopes.setdefault(name, _Scope(name)), 0)
            elif r.operation_code == f.OP["replay.scope_end"]:
                recorder.ret()
            else:
                recorder.import_begin(r.operation)
                try:
                    executor.step(r)
                finally:
                    recorder.import_end(r.operation)
        device.observers.remove(recorder)
    trace = recorder.trace(source=str(path))
    trace.metadata["device"] = device_uri
    return trace
