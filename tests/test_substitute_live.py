"""Substitutions in a live debug run (``engine.substitute.live``): swap mid-run, rerun a dispatch, revert, export.

CPU (local-sync) and Vulkan (lavapipe). Expected values are computed with numpy from the inputs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from support import compile_with_dumps, edited_source, iree_compile

from engine.runtime.debug_runner import DebugRunner, create_device
from engine.runtime.function_io import Tensor
from engine.runtime.hal.device import DispatchObserver
from engine.runtime.hal.module import HalModule
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.runtime.vmfb.module import open_vmfb
from engine.substitute.errors import EditCompileError, InterfaceMismatchError
from engine.substitute.live import LiveSubstitutions

_NO_VULKAN = vulkan_available()

DEVICES = [
    pytest.param("local-sync", "cpu", id="cpu"),
    pytest.param(
        "vulkan",
        "vulkan",
        id="vulkan",
        marks=pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}"),
    ),
]


def _session(tmp_path, device_uri: str, target: str):
    vmfb = compile_with_dumps("elementwise", target, tmp_path / target)
    device = create_device(device_uri)
    runner = DebugRunner(vmfb, device_uri, hal_module=HalModule(device))
    live = LiveSubstitutions(device, open_vmfb(vmfb))
    return vmfb, runner, device, live


def _inputs():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    return a, b


def _call(runner, a, b) -> np.ndarray:
    (out,) = runner.invoke("main", [Tensor.from_numpy(a), Tensor.from_numpy(b)])
    return out.array


@pytest.mark.parametrize("device_uri,target", DEVICES)
def test_apply_rerun_revert(tmp_path, device_uri, target):
    vmfb, runner, device, live = _session(tmp_path, device_uri, target)
    a, b = _inputs()
    snapshots = live.observe()
    original = _call(runner, a, b)
    snap = snapshots.last()
    assert snap is not None and snap.record.export_name.startswith("main_dispatch_0")

    edit = edited_source(tmp_path / target / "sources", tmp_path / "edit.mlir")
    replacement = live.apply("main_dispatch_0", edit)
    assert replacement.whole
    # Rerun the saved dispatch: the output binding holds the edited arithmetic; the inputs are unchanged.
    after = live.rerun(snap)
    out_index = len(after) - 1
    np.testing.assert_array_equal(after[out_index].view(np.float32).reshape(4, 8), (a * b) * np.abs(a))
    np.testing.assert_array_equal(snap.after[out_index], original.view(np.uint8).reshape(-1))
    # The next call's dispatch runs the edit too.
    np.testing.assert_array_equal(_call(runner, a, b), (a * b) * np.abs(a))

    live.revert("main_dispatch_0")
    np.testing.assert_array_equal(_call(runner, a, b), original)
    np.testing.assert_array_equal(live.rerun(snap)[out_index], snap.after[out_index])
    assert [e.action for e in live.history] == ["apply", "revert"]


@pytest.mark.parametrize("device_uri,target", DEVICES)
def test_swap_while_paused_at_the_dispatch(tmp_path, device_uri, target):
    """Applied from inside the observer (where a paused session waits), the dispatch about to run uses the edit."""
    vmfb, runner, device, live = _session(tmp_path, device_uri, target)
    a, b = _inputs()
    edit = edited_source(tmp_path / target / "sources", tmp_path / "edit.mlir")

    class PauseAndEdit(DispatchObserver):
        def before_dispatch(self, record):
            live.apply(record.export_name, edit)

    device.observers.append(PauseAndEdit())
    np.testing.assert_array_equal(_call(runner, a, b), (a * b) * np.abs(a))


def test_failed_edits_change_nothing(tmp_path):
    vmfb, runner, device, live = _session(tmp_path, "local-sync", "cpu")
    a, b = _inputs()
    original = _call(runner, a, b)
    src = (tmp_path / "cpu" / "sources" / "module_main_dispatch_0.mlir").read_text()
    bad = tmp_path / "bad.mlir"
    bad.write_text(src.replace("arith.addf", "arith.addq"))
    with pytest.raises(EditCompileError) as e:
        live.apply("main_dispatch_0", bad)
    assert e.value.diagnostics[0].line == next(i for i, t in enumerate(src.splitlines(), 1) if "arith.addf" in t)
    other = tmp_path / "renamed.mlir"
    other.write_text(re.sub(r"main_dispatch_0_elementwise_32_f32", "main_dispatch_0_other", src))
    with pytest.raises(InterfaceMismatchError):
        live.apply("main_dispatch_0", other)
    np.testing.assert_array_equal(_call(runner, a, b), original)
    assert live.history == []


def test_export_writes_files_and_flags(tmp_path):
    vmfb, runner, device, live = _session(tmp_path, "local-sync", "cpu")
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    live.apply("main_dispatch_0_elementwise_32_f32", edit)
    flags = live.export(tmp_path / "export")
    text = flags.read_text()
    assert "--iree-hal-substitute-executable-source=main_dispatch_0=edit.mlir" in text
    assert (tmp_path / "export" / "edit.mlir").read_text() == edit.read_text()
    # The flag reproduces the edit with IREE's own compiler and runtime.

    from support import TARGET_FLAGS as TARGETS

    from engine.runtime.reference import ReferenceRunner
    from engine.samples import sample_path

    out = tmp_path / "reproduced.vmfb"
    iree_compile(
        [str(sample_path("elementwise")), *TARGETS["cpu"], "-o", str(out),
         *[f for f in text.splitlines()[2].split()]],
        check=True, cwd=tmp_path / "export", )  # fmt: skip
    a, b = _inputs()
    (got,) = ReferenceRunner(out, "local-sync").invoke("main", [Tensor.from_numpy(a), Tensor.from_numpy(b)])
    np.testing.assert_array_equal(got.array, (a * b) * np.abs(a))


def test_errors_travel_as_plain_data(tmp_path):
    import pickle

    from engine.substitute.errors import plain_error

    vmfb, runner, device, live = _session(tmp_path, "local-sync", "cpu")
    live = LiveSubstitutions.for_runner(runner)
    bad = tmp_path / "bad.mlir"
    bad.write_text((tmp_path / "cpu" / "sources" / "module_main_dispatch_0.mlir").read_text().replace("arith.addf", "x.y"))
    with pytest.raises(EditCompileError) as e:
        live.apply("main_dispatch_0", bad)
    plain = pickle.loads(pickle.dumps(plain_error(e.value)))
    assert plain["kind"] == "compile" and plain["diagnostics"][0]["line"] > 0


def test_session_queries_while_paused_at_a_dispatch(tmp_path):
    """What a session answers when the editor applies while the run waits at the dispatch."""
    from engine.session.protocol import (
        BenchmarkDispatch,
        DispatchBenchmark,
        DispatchRerun,
        RerunDispatch,
        RevertSubstitution,
        Substitute,
        Substituted,
        SubstitutionRefused,
        SubstitutionReverted,
    )
    from engine.substitute.session_queries import answer

    vmfb, runner, device, live = _session(tmp_path, "local-sync", "cpu")
    a, b = _inputs()
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    bad = tmp_path / "bad.mlir"
    bad.write_text(edit.read_text().replace("arith.mulf %7", "arith.mulq %7"))
    answers = {}

    class Paused(DispatchObserver):
        def before_dispatch(self, record):
            # Paused before the dispatch, before any Substitute: rerun and benchmark still have a dispatch.
            answers["plain_rerun"] = answer(live, RerunDispatch(), record)
            answers["bad"] = answer(live, Substitute("main_dispatch_0", str(bad)), record)
            answers["apply"] = answer(live, Substitute("main_dispatch_0", str(edit)), record)
            answers["rerun"] = answer(live, RerunDispatch(), record)
            answers["benchmark"] = answer(live, BenchmarkDispatch(3), record)

    plain = _call(runner, a, b)  # the module's own kernel
    paused = Paused()
    device.observers.append(paused)
    edited = _call(runner, a, b)
    np.testing.assert_array_equal(edited, (a * b) * np.abs(a))
    device.observers.remove(paused)
    assert isinstance(answers["bad"], SubstitutionRefused)
    assert answers["bad"].kind == "compile" and answers["bad"].diagnostics[0].line > 0
    applied = answers["apply"]
    assert isinstance(applied, Substituted)
    assert applied.whole and applied.exports == ("main_dispatch_0_elementwise_32_f32",)
    rerun = answers["rerun"]
    assert isinstance(rerun, DispatchRerun)
    # Before: the module's own kernel on the same inputs; after: the edit.
    before = rerun.before[-1].to_numpy().view(np.float32).reshape(4, 8)
    after = rerun.after[-1].to_numpy().view(np.float32).reshape(4, 8)
    assert before.tobytes() == plain.tobytes() and after.tobytes() == edited.tobytes()
    unedited = answers["plain_rerun"]
    assert unedited.before[-1].to_numpy().tobytes() == unedited.after[-1].to_numpy().tobytes() == plain.tobytes()
    timing = answers["benchmark"]
    assert isinstance(timing, DispatchBenchmark) and timing.edited
    assert 0 < timing.original_spread_s[0] <= timing.original_s <= timing.original_spread_s[1] < 1
    assert isinstance(answer(live, RevertSubstitution("main_dispatch_0")), SubstitutionReverted)
    assert not live.active
    # Reverting what is not substituted is no error: the editor reverts its text as well.
    assert isinstance(answer(live, RevertSubstitution("main_dispatch_0")), SubstitutionReverted)
    # The revert holds for the next run: the module's own code.
    assert _call(runner, a, b).tobytes() == plain.tobytes()


def test_benchmark_before_and_after(tmp_path):
    from engine.substitute.benchmark import benchmark_tool

    vmfb, runner, device, live = _session(tmp_path, "local-sync", "cpu")
    live.observe()
    a, b = _inputs()
    _call(runner, a, b)
    live.apply("main_dispatch_0", edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir"))
    original, edited = live.benchmark(repeats=3)
    assert 0 < original < 1 and 0 < edited < 1
    if benchmark_tool() is not None:
        original, edited = live.benchmark_with_iree()
        assert 0 < original < 1e-3 and 0 < edited < 1e-3
