"""Mutation fuzzing of every file reader: each damaged input ends in a result or one typed error.

Readers covered: ``.vmfb`` modules (metadata, disassembly, rodata, executables), ``VKE1`` Vulkan executables,
embedded ELF executables (static reading), ``.npy``/``.npz`` run inputs, pass-timing JSON, compiler
diagnostics text, and saved session files. Used by ``tests/test_fuzz_readers.py`` (a short campaign)
and ``benchmarks/fuzz_readers.py`` (a long one).
"""

from __future__ import annotations

import io
import json
import random
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import FormatError, LensError
from engine.runtime.vmfb.fuzzing import mutate


@dataclass(frozen=True)
class Reader:
    name: str
    read: Callable[[bytes], object]
    allowed: tuple[type[BaseException], ...]  # the typed errors a damaged input may end in


def _read_vmfb(data: bytes) -> object:
    from engine.runtime.vmfb.fuzzing import read_everything

    return read_everything(data)


def _read_vke1(data: bytes) -> object:
    from engine.runtime.vmfb.vke1 import read_vke1

    parsed = read_vke1(data)
    for i in range(len(parsed.pipelines)):
        parsed.binding_count(i)
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


READERS: dict[str, Reader] = {
    "vmfb": Reader("vmfb", _read_vmfb, (FormatError,)),
    "vke1": Reader("vke1", _read_vke1, (FormatError,)),
    "elf": Reader("elf", _read_elf, (FormatError,)),
    "npy": Reader("npy", _read_npy, (LensError,)),
    "timing": Reader("timing", _read_timing, (FormatError,)),
    "diagnostics": Reader("diagnostics", _read_diagnostics, ()),
    "session": Reader("session", _read_session, ()),
}


def seed_corpus(vmfb_paths: list[Path]) -> dict[str, list[bytes]]:
    """Valid inputs for every reader, taken from compiled modules and made here."""
    from engine.runtime.vmfb.module import VmfbModule

    corpus: dict[str, list[bytes]] = {name: [] for name in READERS}
    for path in vmfb_paths:
        data = Path(path).read_bytes()
        corpus["vmfb"].append(data)
        module = VmfbModule.from_bytes(data)
        for executable in module.executables:
            if executable.format.startswith("vulkan-spirv"):
                corpus["vke1"].append(bytes(executable.data))
            elif executable.format.startswith("embedded-elf"):
                corpus["elf"].append(bytes(executable.data))
    for array in (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([1, -2], np.int8), np.float16(1.5)):
        buf = io.BytesIO()
        np.save(buf, np.asarray(array))
        corpus["npy"].append(buf.getvalue())
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
    return corpus


@dataclass(frozen=True)
class FuzzResult:
    reader: str
    cases: int
    parsed: int
    rejected: int
    failures: tuple[tuple[str, str], ...]  # (mutation, traceback) of inputs that ended otherwise


def fuzz(reader: Reader, seeds: list[bytes], cases: int, seed: int = 0) -> FuzzResult:
    rng = random.Random(seed)
    parsed = rejected = 0
    failures: list[tuple[str, str]] = []
    for _ in range(cases):
        what, data = mutate(rng, rng.choice(seeds))
        try:
            reader.read(data)
            parsed += 1
        except reader.allowed:
            rejected += 1
        except Exception:
            failures.append((what, traceback.format_exc(limit=6)))
    return FuzzResult(reader.name, cases, parsed, rejected, tuple(failures))
