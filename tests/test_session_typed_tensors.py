"""The debug session types a paused dispatch's tensors itself (ReadTensors), once, from the best source
there is: for a module compiled by plain iree-compile (no sources anywhere, no rebuild) each tensor is
exactly a bound byte range, untyped; for the same module with its executable sources beside it, or rebuilt
from the program its debug locations name, the tensors IREE's runtime traces (HalModuleDebugSink on a --iree-flow-trace-dispatch-tensors build), in shape, element type and bytes.
The session stops after every dispatch of a real-frontend program (attention_block: packed bindings whose
tensors lie at push-constant offsets)."""

from __future__ import annotations

import queue
import shutil
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_traced_tensors
from support.traced import stop_at_every_dispatch, traced_by_dispatch

from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    Breakpoint,
    Call,
    Failed,
    Finished,
    Open,
    Opened,
    ReadTensors,
    SetBreakpoints,
    Stopped,
    Tensors,
    TypeSource,
)

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
TRACE = "--iree-flow-trace-dispatch-tensors"


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    root = tmp_path_factory.mktemp("typed")
    (root / "plain").mkdir()
    plain = compile_for(source, root / "plain" / "attention_block.vmfb", "llvm-cpu")
    # The same module with its sources beside it (IREE's dump layout; the dump is the same IR whatever build
    # writes it, so a second compile provides it and the module stays byte for byte the plain one).
    with_sources = root / "with_sources"
    with_sources.mkdir()
    shutil.copy(plain, with_sources / "attention_block.vmfb")
    compile_for(source, root / "dumped.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={with_sources / 'attention_block.sources'}")
    traced = compile_for(source, root / "traced.vmfb", "llvm-cpu", TRACE)
    x = MODELS / "attention_block_x.npy"
    return plain, with_sources / "attention_block.vmfb", traced_by_dispatch(iree_traced_tensors(traced, "attention_block", [np.load(x)])), x


def test_with_sources_found_every_stop_has_iree_traced_tensors(attention):
    _, vmfb, traced, x = attention
    _assert_traced(stop_at_every_dispatch(vmfb, "attention_block", (f"@{x}",)), traced)


def _assert_traced(answers: list[Tensors], traced) -> None:
    assert len(answers) == len(traced) >= 5
    seen: dict[str, int] = {}
    for answer in answers:
        name = answer.info.export
        n = seen[name] = seen.get(name, -1) + 1
        ins, outs = traced[(name, n)]
        assert {t.type_source for t in answer.tensors} == {TypeSource.SOURCES}, name
        for role, want in (("input", ins), ("output", outs)):
            got = [t for t in answer.tensors if t.role == role]
            assert [t.position for t in got] == list(range(len(want))), (name, role)
            for t, w in zip(got, want, strict=True):
                a = t.tensor.to_numpy()
                assert (a.shape, a.dtype, a.tobytes()) == (w.shape, w.dtype, w.tobytes()), (name, role, t.position)
                assert t.length == w.nbytes and t.offset + t.length <= answer.info.bindings[t.index].length


def test_rebuilt_from_the_program_the_module_names_every_stop_has_iree_traced_tensors(attention):
    # The plain module names /…/attention_block.mlir in its debug locations: the session compiles it again,
    # finds the executables byte for byte the module's, and types with the rebuild's sources.
    vmfb, _, traced, x = attention
    answers = stop_at_every_dispatch(vmfb, "attention_block", (f"@{x}",), rebuild=True)
    _assert_traced(answers, traced)


def test_without_sources_every_stop_has_exactly_the_bound_bytes(attention):
    vmfb, _, traced, x = attention
    after = stop_at_every_dispatch(vmfb, "attention_block", (f"@{x}",))
    before = stop_at_every_dispatch(vmfb, "attention_block", (f"@{x}",), when="before")
    assert len(after) == len(before) == len(traced)
    seen: dict[str, int] = {}
    for at_before, at_after in zip(before, after, strict=True):
        info = at_after.info
        assert at_before.info.export == info.export
        n = seen[info.export] = seen.get(info.export, -1) + 1
        for answer in (at_before, at_after):
            assert {t.type_source for t in answer.tensors} == {TypeSource.UNTYPED}
            # Each binding whole, as bytes: once, or twice (its bytes before and after) when read and written.
            assert {t.index for t in answer.tensors} == set(range(len(info.bindings)))
            for k in range(len(info.bindings)):
                mine = [t for t in answer.tensors if t.index == k]
                assert len(mine) == 1 or {(t.role, t.access) for t in mine} == {("input", "readwrite"),
                                                                               ("output", "readwrite")}
            for t in answer.tensors:
                a = t.tensor.to_numpy()
                assert a.dtype == np.uint8 and a.shape == (info.bindings[t.index].length,) and t.offset == 0
        # Before it runs nothing says what the dispatch reads or writes; after, what it changed is an output
        # (and an input too when it held what an earlier dispatch wrote: in place), unless another binding
        # over the same bytes changed too: then which one wrote is unknown (a binding, its bytes after).
        assert {(t.role, t.access) for t in at_before.tensors} == {("binding", "unknown")}
        assert {(t.role, t.access) for t in at_after.tensors} <= {("input", "read"), ("output", "write"),
            ("input", "readwrite"), ("output", "readwrite"), ("binding", "unknown")}  # fmt: skip
        # IREE's traced tensors lie, byte for byte, inside those ranges: inputs in the bytes before it ran,
        # outputs in what it wrote.
        ins, outs = traced[(info.export, n)]
        bound_before = b"".join(t.tensor.to_numpy().tobytes() for t in at_before.tensors)
        written = b"".join(t.tensor.to_numpy().tobytes() for t in at_after.tensors if t.role != "input")
        assert outs and all(w.tobytes() in written for w in outs), info.export
        assert ins and all(w.tobytes() in bound_before for w in ins), info.export


def _compilers_of(program: Path) -> list[int]:
    """Process ids of the iree-compile processes compiling ``program`` (read from /proc)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        if argv and argv[0].endswith(b"iree-compile") and str(program).encode() in argv:
            pids.append(int(cmdline.parent.name))
    return pids


def test_closing_a_session_stops_its_rebuild(tmp_path):
    # A session that ends while it rebuilds its module's sources must kill the compiler and end the
    # rebuild's thread: a thread left inside a compile outlives the command that started it (the process
    # then ends with that thread still running), and the compiler would keep running on its own.
    import threading
    import time

    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models are not on this machine)")
    program = tmp_path / "attention_block.mlir"  # a fresh path: no earlier rebuild of it is cached
    shutil.copy(source, program)
    vmfb = compile_for(program, tmp_path / "attention_block.vmfb", "llvm-cpu")
    events: queue.Queue = queue.Queue()
    session = InProcessSession(DebugSession, events.put)
    try:
        session.send(Open(str(vmfb), rebuild_sources=True))
        assert isinstance(events.get(timeout=60), Opened)
        session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*"),)))
        session.send(Call("attention_block", (f"@{MODELS / 'attention_block_x.npy'}",)))
        while not isinstance(event := events.get(timeout=120), Stopped):
            assert not isinstance(event, (Failed, Finished)), event
        session.send(ReadTensors())  # no sources beside the module: this starts the rebuild
        deadline = time.monotonic() + 60
        while not _compilers_of(program):
            assert time.monotonic() < deadline, "the rebuild's compiler never started"
            time.sleep(0.05)
    finally:
        session.close()
    assert not _compilers_of(program)
    assert not [t for t in threading.enumerate() if t.name == "lens-rebuild-sources" and t.is_alive()]
