"""Every message of the session protocol is plain data: it survives pickling (a child process, a byte
stream) unchanged, and every command, query, answer and event type has an example here."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np

from engine.session import protocol as p

T = p.TensorRef((2, 3), "<f4", "f32", array=np.arange(6, dtype=np.float32).reshape(2, 3))
U8 = p.TensorRef((4,), "|u1", "u8", array=np.arange(4, dtype=np.uint8))
INFO = p.DispatchInfo(
    3,
    "main_dispatch_3",
    "main_dispatch_3_matmul_4x4_f32",
    (1, 1, 1),
    (7,),
    (p.BindingInfo(0, "buffer 1", 0, 64, "read"), p.BindingInfo(1, "buffer 2", 64, 64, "write")),
    p.DispatchWhen.AFTER,
    "local-sync",
)
LOCATION = p.Location((p.FrameInfo("module", "main", 0x12, "vm.call @hal.x", 4),), INFO.export, 3, INFO)
DETAIL = p.StopDetail(
    registers=p.RegisterFile((1, 2, 3), ("!hal.buffer_view<4xf32>",)),
    breakpoints=("before dispatch #3",),
    nan_bindings=(1,),
    divergence=p.DivergenceStop(3, "d", "d", 0, 0.5, "inf", 2, (0, 1), "", "diverged"),
    import_call="hal.device.queue.execute",
    steps=4,
    position=100,
    earliest=0,
)
WATCHES = (p.WatchRegister(0, "i", 3), p.WatchGlobal("module", 8, 4), p.WatchGlobalRef("module", 1), p.WatchRegisterContents(0, 2, 5), p.WatchRegisterContents(1, 3),
           p.WatchGlobalContents("module", 3), p.WatchGlobalContents("module", 3, 4, 4, "f32"),
           p.WatchBinding(1, 8, 4, "f32"))

COMMANDS = [
    p.Open("/tmp/x.vmfb", "vulkan"),
    p.Call("main", ("4xf32=1",), True),
    p.Step(p.StepMode.OVER, 3),
    p.Continue(),
    p.RunTo("main", 0x10),
    p.SetBreakpoints((p.Breakpoint("dispatch", ordinal=2, when="after"), p.Breakpoint("nan"))),
    p.Reverse(p.ReverseMode.NEXT, 2),
    p.TravelTo(dispatch=1, park=True),
    p.Shutdown(),
]
QUERIES = [
    p.ReadRegisters(1),
    p.ReadGlobals(),
    p.ReadGlobalBuffer(3),
    p.ReadFrames(),
    p.ReadDispatch(),
    p.ReadBinding(1),
    p.ReadBindings(),
    p.ReadTensors(),
    p.ReadHistory(),
    *[p.WhenChanged(w) for w in WATCHES],
    p.Substitute("main_dispatch_0", "/tmp/edit.mlir"),
    p.RerunDispatch(),
    p.RevertSubstitution("main_dispatch_0"),
    p.ExportSubstitutions("/tmp/out"),
    p.BenchmarkDispatch(5),
    p.ReadDisassembly("main"),
    p.ReadModuleFile("/tmp/x.vmfb"),
]
ANSWERS = [
    p.Registers(p.ReadRegisters(), DETAIL.registers),
    p.Globals(p.ReadGlobals(), b"\x01\x00\x00\x00", ("null",)),
    p.Frames(p.ReadFrames(), LOCATION.frames),
    p.PausedDispatch(p.ReadDispatch(), INFO),
    p.BindingBytes(p.ReadBinding(0), 0, U8),
    p.Bindings(p.ReadBindings(), (U8, U8)),
    p.Tensors(p.ReadTensors(), INFO, (p.DispatchTensor(0, "read", T, p.TypeSource.SOURCES, "sources/x.mlir"),)),
    p.History(p.ReadHistory(), True, 10, 0, 20, 4096, (p.DispatchMark(0, "d0", 5, True),)),
    p.LastChange(p.WhenChanged(WATCHES[0]), p.Change("%i3", 9, "module", "main", 4, None, 1, 2)),
    p.LastChange(p.WhenChanged(WATCHES[4]), p.Change("c", 9, "m", "f", 4, None, "0", "2", "a copy", "element [1]", 3)),
    p.SubstitutionRefused(
        p.Substitute("e", "/x"), "compile", "does not compile", (p.EditDiagnostic("/x", 3, 1, "error", "bad"),)
    ),
    p.Substituted(p.Substitute("e", "/x"), ("e_0",), False, 0.25),
    p.DispatchRerun(p.RerunDispatch(), 3, (U8,), (U8,)),
    p.SubstitutionReverted(p.RevertSubstitution("e"), "e"),
    p.SubstitutionsExported(p.ExportSubstitutions("/o"), "/o/substitutions.txt"),
    p.DispatchBenchmark(p.BenchmarkDispatch(), 1e-3, 2e-3),
    p.Disassembly(p.ReadDisassembly("main"), "main", ((0, "vm.return"),)),
    p.ModuleFile(p.ReadModuleFile("x.vmfb"), "/tmp/x.vmfb", np.arange(8, dtype=np.uint8)),
    p.Globals(p.ReadGlobals(), b"", ("!hal.buffer",), (p.GlobalVariable("state", "ref", 0, "!hal.buffer", 32, "8xf32"),), "n"),
    p.GlobalBuffer(p.ReadGlobalBuffer(0), "state", U8, "bytes"),
]
EVENTS = [
    p.Opened("/tmp/x.vmfb", ("main",), "local-sync"),
    p.Stopped(p.StopReason.DISPATCH, LOCATION, DETAIL),
    p.Progress(LOCATION),
    p.Finished("main", "result[0]: ...", (T,)),
    p.Failed("trap", "INVALID_ARGUMENT", LOCATION),
    p.Crashed("segmentation fault", LOCATION, -11),
    p.Log("text"),
    *ANSWERS,
]


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def _concrete(base: type) -> set[type]:
    out = set()
    for cls in vars(p).values():
        if isinstance(cls, type) and issubclass(cls, base) and cls is not base and dataclasses.is_dataclass(cls):
            out.add(cls)
    return out


def test_every_message_type_has_an_example_and_round_trips_through_pickle():
    examples = COMMANDS + QUERIES + EVENTS
    covered = {type(m) for m in examples}
    abstract = {p.Query, p.Answer}
    assert _concrete(p.Command) - abstract <= covered, _concrete(p.Command) - covered
    assert _concrete(p.Event) - abstract <= covered, _concrete(p.Event) - covered
    for message in examples:
        again = pickle.loads(pickle.dumps(message))
        assert _same(message, again), message
        assert not _same(message, object())


def test_every_query_names_its_answer_and_answers_carry_their_query():
    assert set(p.ANSWERS) == _concrete(p.Query)
    for answer in ANSWERS:
        assert isinstance(answer.query, p.Query)
        expected = p.ANSWERS[type(answer.query)]
        assert isinstance(answer, expected) or isinstance(answer, p.SubstitutionRefused), answer


def test_the_tensors_of_a_message_are_found_at_any_depth():
    assert list(p.tensor_refs(p.Finished("main", "", (T,))))[0] is T
    assert [id(t) for t in p.tensor_refs(ANSWERS[5])] == [id(U8), id(U8)]
    tensors = list(p.tensor_refs(ANSWERS[6]))
    assert len(tensors) == 1 and tensors[0] is T
    assert list(p.tensor_refs(p.Stopped("step", LOCATION, DETAIL))) == []
