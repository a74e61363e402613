"""The reference engine numbers each dispatch once, by its own trace points, as the device ran it.

IREE's stream scheduling orders ``--iree-flow-trace-dispatch-tensors`` trace points on the host, not around
each dispatch: in EfficientViT-M0 two dispatches' ``outputs`` come, then two other dispatches whole, then
the first two's ``inputs``. Counting dispatches by ``inputs`` trace points named each later one by the
wrong ordinal ("after #76" for dispatch 77's outputs) and ``break dispatch 79`` stopped at dispatch 77."""

from __future__ import annotations

import json

import pytest
from support import MODELS, compile_for, iree_dispatches, shared_model

from engine.cli import main as lens_main


@pytest.mark.slow
def test_reference_stops_name_each_dispatch_by_the_ordinal_iree_ran_it_at(capsys, tmp_path):
    module = compile_for(
        shared_model("efficientvit_m0"), tmp_path / "efficientvit_m0.traced.vmfb", "llvm-cpu",
        "--iree-flow-trace-dispatch-tensors",
    )  # fmt: skip
    inputs = [f"@{MODELS / 'efficientvit_m0_x.npy'}"]
    ran = [export for export, _ in iree_dispatches(module, "main", inputs, "local-sync", tmp_path)]
    script = tmp_path / "commands.gdb"
    script.write_text("break dispatch *\nbreak dispatch * after\n" + "continue\n" * (2 * len(ran) + 1))
    status = lens_main(["debug", str(module), "--engine=reference", "--function=main", f"--input={inputs[0]}",
                        f"--commands={script}", "--json"])  # fmt: skip
    out = capsys.readouterr()
    assert status == 0, out.err
    stops = [json.loads(line)["dispatch"] for line in out.out.splitlines() if '"dispatch": {' in line]
    assert len(stops) == 2 * len(ran)
    named = {(s["ordinal"], s["when"]): s["name"] for s in stops}
    wrong = [(o, w, named.get((o, w)), export) for o, export in enumerate(ran) for w in ("before", "after")
             if named.get((o, w)) != export]  # fmt: skip
    assert not wrong, wrong[:5]
