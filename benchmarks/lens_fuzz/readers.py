"""Every file reader as a fuzz target: each damaged input must end in a result or the reader's typed error.

Readers covered: ``.vmfb`` modules (metadata, disassembly with source locations, rodata, the debug
database, executables), nested VMVX modules, ``VKE1`` Vulkan executables and their SPIR-V, embedded ELF
executables (static reading), ``--input`` text and ``.npy``/``.npz`` run inputs, pass-timing JSON,
compiler diagnostics text, and saved session files. The short campaigns in ``tests/test_fuzz_*.py`` and
the long ones in ``benchmarks/fuzz_*.py`` run them under time and memory limits (``bounded.py``).
"""

from __future__ import annotations

import io
import json
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import FormatError, LensError, VmfbFormatError


@dataclass(frozen=True)
class Reader:
    name: str
    read: Callable[[bytes], object]
    allowed: tuple[type[BaseException], ...]  # the typed errors a damaged input may end in


def read_everything(data: bytes, name: str = "<fuzz>") -> int:
    """Parse ``data`` as a module and read all of it: metadata, JSON, every function's disassembly with
    source locations, the debug database, executables (with their details). Returns a count of lines.

    Raises only ``VmfbFormatError`` for a damaged module.
    """
    from engine.runtime.vmfb.describe import metadata_lines, module_json
    from engine.runtime.vmfb.disassembler import module_lines
    from engine.runtime.vmfb.executables import executable_details
    from engine.runtime.vmfb.module import VmfbModule

    m = VmfbModule.from_bytes(data, name=name)
    n = sum(1 for _ in metadata_lines(m))
    n += sum(1 for _ in module_lines(m, bytecode_offsets=True, rodata=False, locations=True))
    module_json(m)
    db = m.debug_database
    if db is not None:
        for i in range(len(db.locations)):
            db.location_text(i)
        for f in db.functions:
            len(f.locations)
    for x in m.executables:
        executable_details(x)
        n += 1
    return n


def _read_vmfb(data: bytes) -> object:
    return read_everything(data)


def _read_input_text(data: bytes) -> object:
    from engine.runtime.function_io import parse_inputs

    specs = [s for s in data.decode("utf-8", errors="replace").splitlines() if not s.startswith("@")]
    return parse_inputs(specs, "rifIF" * (len(specs) // 5 + 1))


def _read_vke1(data: bytes) -> object:
    from engine.runtime.vmfb.vke1 import read_vke1

    parsed = read_vke1(data)
    for i in range(len(parsed.pipelines)):
        parsed.binding_count(i)
    # A quarter of the cases also hand the SPIR-V to spirv-dis (a process each: too slow for all).
    if zlib.crc32(data) % 4 == 0:
        from engine.runtime.vmfb.executables import spirv_disassembly

        for shader in parsed.shader_modules:
            spirv_disassembly(shader.spirv)
    return parsed


def _read_elf(data: bytes) -> object:
    from engine.runtime.vmfb.executables import read_elf

    return read_elf(data)


def _read_npy(data: bytes) -> object:
    from engine.runtime.function_io import parse_inputs

    with tempfile.NamedTemporaryFile(suffix=".npy") as f:
        f.write(data)
        f.flush()
        return parse_inputs([f"@{f.name}"], "r")


def _read_timing(data: bytes) -> object:
    from engine.compiler.timing import parse_timing, split_timing_output

    _, parsed = split_timing_output(data.decode("utf-8", errors="replace"))
    return None if parsed is None else parse_timing(parsed)


def _read_diagnostics(data: bytes) -> object:
    from engine.compiler.diagnostics import parse_diagnostics

    return parse_diagnostics(data.decode("utf-8", errors="replace"))


def _read_session(data: bytes) -> object:
    from engine.session.persist import SessionStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(tmp)
        store.session_file.write_bytes(data)
        return store.load()


def _read_trace(data: bytes) -> object:
    """A trace file as the zones view opens it (Chrome JSON, ireeperf-jsonl, compile timing...)."""
    from engine.trace.open import load_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_bytes(data)
        trace = load_trace(path)
    return trace


def _read_bundle(data: bytes) -> object:
    """A capture bundle's manifest (its tensor files are valid), read with every tensor it names."""
    from engine.dispatch.bundle import MANIFEST, Bundle

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / MANIFEST).write_bytes(data)
        np.save(Path(tmp) / "t0.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
        np.save(Path(tmp) / "t1.npy", np.array([1, 2], np.uint16))
        bundle = Bundle(tmp)
        out = [
            bundle.module,
            bundle.function,
            bundle.program_tensors("inputs"),
            bundle.program_tensors("outputs"),
        ]
        for entry in bundle.dispatches:
            out += [bundle.dispatch_tensors(entry, "inputs"), bundle.dispatch_tensors(entry, "outputs")]
    return out


def _read_replay(data: bytes) -> object:
    """An IREE HAL replay (``.ireereplay``) listed as iree-dump-replay lists it, described, and every
    executable's metadata read."""
    from engine.replay.model import describe_replay
    from engine.replay.payloads import ExecutablePrepare
    from engine.replay.projection import jsonl_rows
    from engine.replay.reader import ReplayFile

    replay = ReplayFile.from_bytes(data)
    rows = list(jsonl_rows(replay))
    for r in replay.records():
        payload = replay.decode(r)
        if isinstance(payload, ExecutablePrepare):
            payload.functions  # noqa: B018 (read: the ABI metadata is checked when asked for)
    return rows, describe_replay(replay)


def _replay_errors() -> tuple[type[BaseException], ...]:
    from engine.errors import ReplayFormatError

    return (ReplayFormatError,)


def _trace_errors() -> tuple[type[BaseException], ...]:
    from engine.trace.model import TraceFormatError

    return (TraceFormatError,)


def _bundle_errors() -> tuple[type[BaseException], ...]:
    from engine.dispatch.bundle import BundleError

    return (BundleError,)


READERS: dict[str, Reader] = {
    "vmfb": Reader("vmfb", _read_vmfb, (VmfbFormatError,)),
    "input": Reader("input", _read_input_text, (LensError,)),
    "vke1": Reader("vke1", _read_vke1, (FormatError,)),
    "elf": Reader("elf", _read_elf, (FormatError,)),
    "npy": Reader("npy", _read_npy, (LensError,)),
    "timing": Reader("timing", _read_timing, (FormatError,)),
    "diagnostics": Reader("diagnostics", _read_diagnostics, ()),
    "session": Reader("session", _read_session, ()),
    "trace": Reader("trace", _read_trace, _trace_errors()),
    "bundle": Reader("bundle", _read_bundle, _bundle_errors()),
    "replay": Reader("replay", _read_replay, _replay_errors()),
}


def seed_corpus(vmfb_paths: list[Path], replay_paths: list[Path] = ()) -> dict[str, list[bytes]]:
    """Valid inputs for every reader, taken from compiled modules (and replays IREE recorded of them)
    and made here."""
    from engine.runtime.vmfb.module import VmfbModule

    corpus: dict[str, list[bytes]] = {name: [] for name in READERS}
    corpus["replay"] += [Path(p).read_bytes() for p in replay_paths]
    for path in vmfb_paths:
        data = Path(path).read_bytes()
        corpus["vmfb"].append(data)
        module = VmfbModule.from_bytes(data)
        for executable in module.executables:
            if executable.format.startswith("vulkan-spirv"):
                corpus["vke1"].append(bytes(executable.data))
            elif executable.format.startswith("embedded-elf"):
                corpus["elf"].append(bytes(executable.data))
            elif executable.format == "vmvx-bytecode-fb":
                corpus["vmfb"].append(bytes(executable.data))  # a nested module is a module too
    for array in (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([1, -2], np.int8), np.float16(1.5)):
        buf = io.BytesIO()
        np.save(buf, np.asarray(array))
        corpus["npy"].append(buf.getvalue())
    buf = io.BytesIO()
    np.savez(buf, a=np.ones((2, 3), np.float32), b=np.arange(4, dtype=np.int64))
    corpus["npy"].append(buf.getvalue())
    corpus["input"].append(b"4xf32=1,2,3,4\n7\n2.5\n-3\n1.5e3\n2x2xi8=[1 2][3 4]\n(null)\n&4xi32=0\n")
    timing = [
        {
            "wall": {"duration": 0.5, "percentage": 50},
            "user": {"duration": 0.4, "percentage": 40},
            "name": "Parse",
            "passes": [{"wall": {"duration": 0.1}, "user": {"duration": 0.1}, "name": "Inner"}, {}],
        },
        {"wall": {"duration": -0.1}, "user": {"duration": 0.0}, "name": "Rest"},
        {"wall": {"duration": 1.0}, "user": {"duration": 0.9}, "name": "Total"},
    ]
    corpus["timing"].append(("note: compiling\n" + json.dumps(timing, indent=1)).encode())
    corpus["diagnostics"].append(
        b"input.mlir:2:19: error: use of value '%a' expects different type than prior uses\n"
        b"input.mlir:1:17: note: prior use here\n<stdin>:3:1: warning: something\n"
    )
    corpus["session"].append(
        json.dumps(
            {
                "module_path": "/m.vmfb",
                "breakpoints": [{"kind": "import", "import_name": "x"}],
                "compile_options": {"target": "vmvx"},
                "inputs": ["4xf32=1"],
            }
        ).encode()
    )
    corpus["trace"] += [
        json.dumps(
            {
                "traceEvents": [
                    {
                        "name": "dispatch_0",
                        "ph": "X",
                        "ts": 1,
                        "dur": 5,
                        "pid": 1,
                        "tid": 1,
                        "args": {"n": 1},
                    },
                    {"name": "dispatch_1", "ph": "X", "ts": 2, "dur": 1, "pid": 1, "tid": 1},
                    {"name": "mark", "ph": "i", "ts": 3, "pid": 1, "tid": 2, "s": "t"},
                    {"name": "mem", "ph": "C", "ts": 4, "pid": 1, "args": {"bytes": 10}},
                ]
            }
        ).encode(),
        b"\n".join(
            json.dumps(r).encode()
            for r in (
                {"record_type": "schema", "version": 1},
                {
                    "record_type": "executable_function",
                    "executable_id": 1,
                    "function_ordinal": 0,
                    "name": "d0",
                },
                {
                    "record_type": "host_execution_event",
                    "op": "dispatch",
                    "start_host_time_ns": 100,
                    "end_host_time_ns": 250,
                    "executable_id": 1,
                    "function_ordinal": 0,
                },
                {"record_type": "queue_event", "op": "barrier", "host_time_ns": 120},
                {"record_type": "memory_event", "event_type": "alloc", "host_time_ns": 130, "length": 64},
            )
        ),
        corpus["timing"][0].split(b"\n", 1)[1],
    ]
    corpus["bundle"].append(
        json.dumps(
            {
                "format": "iree-lens-capture/1",
                "module": "m.vmfb",
                "function": "main",
                "inputs": ["t0.npy"],
                "input_types": ["2x3xf32"],
                "outputs": ["t1.npy"],
                "output_types": ["2xbf16"],
                "dispatches": [
                    {
                        "ordinal": 0,
                        "name": "main_dispatch_0",
                        "inputs": ["t0.npy"],
                        "outputs": ["t1.npy"],
                        "input_types": ["2x3xf32"],
                        "output_types": ["2xf16"],
                    }
                ],
            }
        ).encode()
    )
    return corpus
