"""A tensor region no dispatch wrote is undefined: an in-place concatenation's parts not yet written are
marked so in the capture (``DispatchEntry.undefined``), and equal IREE's traced tensors everywhere else."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_traced_tensors, lens_in_process
from support.traced import TRACE, assert_bundle_equals_traced, stop_at_every_dispatch

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle

PACKED_CONCAT = Path(__file__).parent / "diverge_programs" / "packed_concat.mlir"


def _compile(out: Path, *flags: str) -> Path:
    proc = iree_compile(
        [str(PACKED_CONCAT), *target_flags("llvm-cpu"), *flags, "-o", str(out)],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_the_unwritten_parts_of_an_in_place_concatenation_are_undefined(tmp_path):
    dump = tmp_path / "sources"
    plain = _compile(tmp_path / "plain.vmfb", f"--iree-hal-dump-executable-sources-to={dump}")
    traced = _compile(tmp_path / "traced.vmfb", TRACE)
    a = np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24)
    b = np.linspace(-2, 0, 16 * 40, dtype=np.float32).reshape(16, 40)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    proc = lens_in_process(*["capture", str(plain), "--function=main",
         f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}", f"--out={tmp_path / 'bundle'}",
         f"--sources={dump}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    bundle = Bundle(tmp_path / "bundle")
    copies = [d for d in bundle.dispatches if d.name.endswith("slow_memcpy")]
    assert len(copies) == 2, [d.name for d in bundle.dispatches]
    first, second = copies
    row = 64 * 4  # bytes of a row of the 16x64 concatenation
    # The first copy writes columns 0..23 of each row: before it nothing of the 16x64 tensor is defined,
    # after it columns 24..63 are still not.
    assert first.undefined["input1"] == [[0, 16 * row]]
    assert first.undefined["output0"] == [[r * row + 24 * 4, (r + 1) * row] for r in range(16)]
    # The second writes columns 24..63: it reads what the first left, and leaves the tensor defined.
    assert second.undefined == {"input1": first.undefined["output0"]}
    # Nothing else is undefined, and everything defined equals IREE's traced tensors.
    assert all(not d.undefined for d in bundle.dispatches if d not in copies)
    assert_bundle_equals_traced(bundle, iree_traced_tensors(traced, "main", [a, b]))


def test_the_session_marks_the_same_undefined_bytes_as_capture(tmp_path):
    """The debug session's answer at a stop (ReadTensors: DispatchTensor.undefined) marks, by the same rule,
    the bytes capture marks: after each dispatch the same ranges; before it, those of its in-place tensors
    as the memory holds them (the input's)."""
    dump = tmp_path / "plain.sources"  # beside the module: the session types with them
    plain = _compile(tmp_path / "plain.vmfb", f"--iree-hal-dump-executable-sources-to={dump}")
    a = np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24)
    b = np.linspace(-2, 0, 16 * 40, dtype=np.float32).reshape(16, 40)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    inputs = (f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}")
    proc = lens_in_process(*["capture", str(plain), "--function=main",
         *(f"--input={i}" for i in inputs), f"--out={tmp_path / 'bundle'}", f"--sources={dump}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    captured = Bundle(tmp_path / "bundle").dispatches
    assert sum(bool(d.undefined) for d in captured) == 2  # the two copies into the concatenation

    def marked(answer) -> dict[str, list[list[int]]]:
        found = {f"{t.role}{t.position}": [list(r) for r in t.undefined] for t in answer.tensors if t.undefined}
        assert all(t.undefined is not None for t in answer.tensors), answer.tensors  # known: all typed
        return found

    after = stop_at_every_dispatch(plain, "main", inputs, "after")
    assert [a.info.export for a in after] == [d.name for d in captured]
    assert [marked(a) for a in after] == [d.undefined for d in captured]
    before = stop_at_every_dispatch(plain, "main", inputs, "before")
    assert [a.info.export for a in before] == [d.name for d in captured]
    for answer, d in zip(before, captured):
        # Before the dispatch its in-place output is the memory its input is read from: the same bytes.
        expected = {k: d.undefined["input1"] for k in ("input1", "output0")} if d.undefined else {}
        assert marked(answer) == expected, (d.name, marked(answer))
    # The bytes the answer calls undefined are counted where they are shown.
    first = next(a for a in after if marked(a))
    out = next(t for t in first.tensors if t.role == "output")
    assert out.undefined_bytes == 16 * 40 * 4
    # The CLI's save-tensors at the same stop names the same ranges beside the files it writes.
    script = tmp_path / "commands.gdb"
    script.write_text(f"break dispatch 2 after\ncontinue\nsave-tensors {tmp_path / 'saved'}\n")
    proc = lens_in_process(*["debug", str(plain), "--function=main",
         *(f"--input={i}" for i in inputs), f"--commands={script}", "--json"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"saved"')]
    assert saved and saved[0]["undefined"] == {f"dispatch2_after_{k}.npy": v for k, v in captured[2].undefined.items()}


PADDED_SQUARE = Path(__file__).parent / "diverge_programs" / "padded_square.mlir"


def test_a_fill_defines_the_padding_the_copy_does_not_write(tmp_path):
    """IREE zero-fills a padded tensor (``fill_buffer``) before copying the interior in place: the fill is a
    write. Before transfers were followed, the copy's output called its 576 bytes of padding undefined, in
    the capture and at the session's stop (EfficientViT's first dispatch, 612,912 bytes, in the window)."""
    dump = tmp_path / "plain.sources"  # beside the module: the session types with them
    proc = iree_compile([str(PADDED_SQUARE), *target_flags("llvm-cpu"), f"--iree-hal-dump-executable-sources-to={dump}",
                         "-o", str(tmp_path / "plain.vmfb")], text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    plain = tmp_path / "plain.vmfb"
    x = np.arange(4 * 8 * 8, dtype=np.float32).reshape(1, 4, 8, 8)
    np.save(tmp_path / "x.npy", x)
    inputs = (f"@{tmp_path / 'x.npy'}",)
    proc = lens_in_process(*["capture", str(plain), "--function=main", f"--input={inputs[0]}",
                             f"--out={tmp_path / 'bundle'}", f"--sources={dump}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    captured = Bundle(tmp_path / "bundle").dispatches
    assert [d.name.rsplit("_", 1)[-1] for d in captured][:1] == ["memcpy"]  # the premise: an in-place copy first
    assert [d.undefined for d in captured] == [{}, {}]
    after = stop_at_every_dispatch(plain, "main", inputs, "after")
    for answer in after:
        assert all(t.undefined == () for t in answer.tensors), [(t.role, t.undefined) for t in answer.tensors]
    # And the bytes are the padded input (the fill's zeros around the copy).
    padded = next(t for t in after[0].tensors if t.role == "output")
    expected = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    assert np.array_equal(padded.tensor.to_numpy().reshape(1, 4, 10, 10), expected)


def _in_place_undefined_at_stops(module: Path, inputs: tuple[str, ...], after: tuple[int, ...], calls: int):
    """A session opened without sources beside ``module`` (rebuilt at the first stop, as the window does),
    stopped after each dispatch of ``after`` in each of ``calls`` calls: at each stop, the export and each
    in-place tensor's ``undefined`` ("input1" -> ranges, or None when not known)."""
    import queue

    from engine.session.debug_session import DebugSession
    from engine.session.inprocess import InProcessSession
    from engine.session.protocol import (
        Breakpoint,
        Call,
        Continue,
        Finished,
        Log,
        Open,
        Opened,
        ReadTensors,
        SetBreakpoints,  # fmt: skip
        Stopped,
        Tensors,
    )

    events: queue.Queue = queue.Queue()
    session = InProcessSession(DebugSession, events.put)

    def next_event(kind):
        while isinstance(event := events.get(timeout=120), Log):
            pass
        assert isinstance(event, kind), event
        return event

    seen = []
    try:
        session.send(Open(str(module), rebuild_sources=True))
        next_event(Opened)
        session.send(SetBreakpoints(tuple(Breakpoint("dispatch", ordinal=k, when="after") for k in after)))
        for _ in range(calls):
            session.send(Call("main", inputs))
            for _ in after:
                next_event(Stopped)
                session.send(ReadTensors(wait_for_sources=True))
                answer = next_event(Tensors)
                assert all(t.type_source == "sources" for t in answer.tensors), answer.tensors
                seen.append((answer.info.export, {f"{t.role}{t.position}": t.undefined for t in answer.tensors
                                                  if t.access == "readwrite"}))  # fmt: skip
                session.send(Continue())
            next_event(Finished)
    finally:
        session.close()
    return seen


def test_the_fill_is_followed_while_the_sources_are_still_being_rebuilt(tmp_path):
    """A module with no sources beside it (compiled the usual way): the session rebuilds them at the first
    stop. The fill before the first copy ran before they were there; it was not followed (transfers were
    followed only when sources were found at open), so the window said EfficientViT's first dispatch held
    612,912 undefined bytes (the padding the fill had zeroed) and every later padded tensor the same.
    After a dispatch that ran before the sources were there nothing is known (never called undefined) for
    the rest of that call; the next call, with the sources, is known again where it wrote (the fill and the
    copy define the whole padded tensor)."""
    program = tmp_path / "padded_square.mlir"
    program.write_text(PADDED_SQUARE.read_text())
    plain = tmp_path / "plain.vmfb"
    proc = iree_compile([str(program), *target_flags("llvm-cpu"), "-o", str(plain)], text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.save(tmp_path / "x.npy", np.arange(4 * 8 * 8, dtype=np.float32).reshape(1, 4, 8, 8))
    inputs = (f"@{tmp_path / 'x.npy'}",)
    before = stop_at_every_dispatch(plain, "main", inputs, "before", rebuild=True)
    assert before[0].info.export.endswith("memcpy") and all(t.type_source == "sources" for t in before[0].tensors)
    in_place = [(t.role, t.undefined) for t in before[0].tensors if t.access == "readwrite"]
    assert [role for role, _ in in_place] == ["input", "output"], in_place  # the premise: copied in place
    assert all(undefined == () for _, undefined in in_place), in_place  # the fill's zeros: it was followed
    seen = _in_place_undefined_at_stops(plain, inputs, (0,), calls=2)
    assert [export.endswith("memcpy") for export, _ in seen] == [True, True]
    assert [undefined for _, undefined in seen] == [{"input1": None, "output0": None}, {"input1": (), "output0": ()}]


@pytest.mark.slow
def test_a_real_models_session_marks_what_its_capture_marks(tmp_path):
    """EfficientViT-M0: the session's answer after each dispatch (the in-place tensors' bytes copied by the
    watch itself, changes counted in words) marks the ranges capture marks (every binding copied, changes
    found byte by byte and widened to words): four dispatches leave part of an in-place tensor undefined,
    and the fills define every padded tensor. The watch copied every binding of such a dispatch and counted
    changed bytes in runs (millions on one of SqueezeNet's convolutions): a typed session took 7-9x a plain one."""
    from support import SHARED_MODELS, model_cpu_build

    build = model_cpu_build("efficientvit_m0", tmp_path / "efficientvit_m0.vmfb", sources_beside=True)
    x = SHARED_MODELS / "efficientvit_m0_x.npy"
    if not x.exists():
        pytest.skip(f"{x} is absent")
    inputs = (f"@{x}",)
    proc = lens_in_process(*["capture", str(build.module), "--function=main", f"--input={inputs[0]}",
                             f"--out={tmp_path / 'bundle'}", f"--sources={build.sources}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    captured = Bundle(tmp_path / "bundle").dispatches
    after = stop_at_every_dispatch(build.module, "main", inputs, "after")
    in_place = sum(any(t.access == "readwrite" for t in a.tensors) for a in after)
    assert in_place >= 10, in_place  # the premise: the watch's own path (a dispatch working in place) is taken
    assert sum(bool(d.undefined) for d in captured) >= 1  # and some bytes are undefined
    assert [a.info.export for a in after] == [d.name for d in captured]
    marked = [{f"{t.role}{t.position}": [list(r) for r in t.undefined] for t in a.tensors if t.undefined}
              for a in after]  # fmt: skip
    assert marked == [d.undefined for d in captured]


def test_a_program_with_no_in_place_dispatch_has_nothing_undefined_and_follows_nothing(tmp_path, monkeypatch):
    """No export of the mlp sample reads and writes a tensor in place: every answer says nothing is undefined
    (known, not None), and the session follows none of the device's transfers (each would cut its native
    batches: the 96-layer transformer, with none either, ran 10x slower typed than untyped)."""
    from engine.dispatch.debug_capture import InPlaceTensors
    from engine.samples import sample_path

    dump = tmp_path / "mlp.sources"  # beside the module: the session types with them
    proc = iree_compile([str(sample_path("mlp")), *target_flags("llvm-cpu"), f"--iree-hal-dump-executable-sources-to={dump}",
                         "-o", str(tmp_path / "mlp.vmfb")], text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    followed = []  # the devices whose transfers the session starts following
    monkeypatch.setattr(InPlaceTensors, "follow_transfers", lambda self, device: followed.append(device))
    after = stop_at_every_dispatch(tmp_path / "mlp.vmfb", "main", ("2x16xf32=0.5",), "after")
    assert len(after) == 2 and all(t.type_source == "sources" for a in after for t in a.tensors)
    assert all(t.undefined == () for a in after for t in a.tensors)
    assert followed == []


def test_after_a_call_the_watch_did_not_see_whole_only_what_it_sees_written_is_known(tmp_path):
    """packed_concat with its sources rebuilt at the first stop, after dispatch 2 (so dispatches 0-2 of the
    first call ran untyped: nothing is known of that call). In the next call, the slab the two copies fill
    held what the first call left, which the watch did not see: before the first copy and after it, what it
    does not cover is not known (None), never called undefined; after the second copy every byte of it was
    written in this call: known, nothing undefined."""
    plain = _compile(tmp_path / "plain.vmfb")  # no sources beside it: rebuilt from the program it names
    np.save(tmp_path / "a.npy", np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24))
    np.save(tmp_path / "b.npy", np.linspace(-2, 0, 16 * 40, dtype=np.float32).reshape(16, 40))
    inputs = (f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}")
    seen = _in_place_undefined_at_stops(plain, inputs, (2, 3), calls=2)
    assert all(export.endswith("slow_memcpy") for export, _ in seen), seen
    undefined = [u for _, u in seen]
    assert undefined[:2] == [{"input1": None, "output0": None}] * 2  # the first call: not known at all
    assert undefined[2] == {"input1": None, "output0": None}, undefined[2]  # what the first copy left: not known
    assert undefined[3] == {"input1": None, "output0": ()}, undefined[3]  # both copies wrote it all in this call
