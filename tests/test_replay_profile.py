"""Zones of a replay name its scopes right every time: the zone recorder caches names by the object's
``id()``, and a scope object freed and replaced could hand its id (and name) to the next scope."""

from __future__ import annotations

from support import compile_with_dumps, record_replay

from engine.replay.profile import profile_replay


def test_every_profile_of_a_replay_has_its_init_execute_and_deinit_scopes(tmp_path):
    vmfb = compile_with_dumps("mlp", "cpu", tmp_path / "mlp")
    replay = record_replay(vmfb, "main", ["2x16xf32=0.25"], tmp_path / "mlp.ireereplay")
    noise = []
    for i in range(20):
        noise.append([object() for _ in range(i)])  # shift where the next objects are allocated
        trace = profile_replay(str(replay), "local-sync")
        names = {trace.names.strings[int(k)] for k in trace.zones.name}
        assert {"init", "execute", "deinit", "device.queue_execute"} <= names, (i, sorted(names))
