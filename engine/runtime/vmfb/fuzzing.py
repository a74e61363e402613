"""Mutation fuzzing of the .vmfb reader: every damaged input must end in a parsed module or one typed error.

Used by ``tests/test_fuzz_vmfb.py`` (a short campaign) and ``benchmarks/fuzz_vmfb.py`` (a long one).
"""

from __future__ import annotations

import random
import struct
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

from engine.errors import VmfbFormatError


def read_everything(data: bytes, name: str = "<fuzz>") -> int:
    """Parse ``data`` as a module and read all of it: metadata, every function's disassembly,
    rodata, executables (with their details) and the debug database. Returns a count of lines made.

    Raises only ``VmfbFormatError`` for a damaged module.
    """
    from engine.runtime.vmfb.describe import metadata_lines, module_json
    from engine.runtime.vmfb.disassembler import module_lines
    from engine.runtime.vmfb.module import VmfbModule

    m = VmfbModule.from_bytes(data, name=name)
    n = sum(1 for _ in metadata_lines(m))
    n += sum(1 for _ in module_lines(m, bytecode_offsets=True, rodata=False))
    module_json(m)
    db = m.debug_database
    if db is not None:
        for i in range(len(db.locations)):
            db.location_text(i)
        for f in db.functions:
            len(f.locations)
    try:
        from engine.runtime.vmfb.executables import executable_details
    except ImportError:  # executables module not present
        executable_details = None
    for x in m.executables:
        if executable_details is not None:
            executable_details(x)
        n += 1
    return n


def mutate(rng: random.Random, data: bytes, hot: tuple[int, int] | None = None) -> tuple[str, bytes]:
    """One random mutation of ``data``; ``hot`` is a byte range where most mutations land."""
    buf = bytearray(data)
    lo, hi = hot if hot else (0, len(buf))
    hi = max(lo + 1, min(hi, len(buf)))
    kind = rng.randrange(6)
    if kind == 0:  # flip a few bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(lo, hi)
            buf[i] ^= 1 << rng.randrange(8)
        return "bitflip", bytes(buf)
    if kind == 1:  # truncate
        return "truncate", bytes(buf[: rng.randrange(len(buf))])
    if kind == 2:  # overwrite a u32 with an interesting value
        i = rng.randrange(lo, max(lo + 1, hi - 4))
        v = rng.choice(
            [0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, len(buf), len(buf) - 4, rng.getrandbits(32)]
        )
        struct.pack_into("<I", buf, min(i, len(buf) - 4), v)
        return "u32", bytes(buf)
    if kind == 3:  # zero a range
        i = rng.randrange(lo, hi)
        buf[i : i + rng.randint(1, 64)] = bytes(min(len(buf) - i, rng.randint(1, 64)))
        return "zero", bytes(buf)
    if kind == 4:  # random bytes
        for _ in range(rng.randint(1, 16)):
            buf[rng.randrange(lo, hi)] = rng.randrange(256)
        return "bytes", bytes(buf)
    # splice: duplicate a chunk over another place
    a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
    n = rng.randint(1, 256)
    chunk = buf[a : a + n]
    buf[b : b + len(chunk)] = chunk
    return "splice", bytes(buf[: len(data)])


@dataclass(frozen=True)
class FuzzFailure:
    case: int
    mutation: str
    error: str  # the unexpected exception with its traceback


def flatbuffer_range(data: bytes) -> tuple[int, int]:
    """The byte range of the module flatbuffer (where mutations are most interesting)."""
    from engine.runtime.vmfb.container import locate

    layout = locate(memoryview(data))
    return layout.flatbuffer_start - 4, layout.flatbuffer_end


def campaign(samples: dict[str, bytes], cases: int, seed: int = 0) -> Iterator[tuple[int, str, str, object]]:
    """Run ``cases`` mutations over ``samples``; yields (case, sample, mutation, outcome) where outcome
    is "ok", "error" (a VmfbFormatError) or a FuzzFailure."""
    rng = random.Random(seed)
    names = sorted(samples)
    hots = {k: flatbuffer_range(v) for k, v in samples.items()}
    for case in range(cases):
        name = names[case % len(names)]
        data = samples[name]
        kind, mutated = mutate(rng, data, hots[name] if rng.random() < 0.8 else None)
        try:
            read_everything(mutated, name)
            outcome: object = "ok"
        except VmfbFormatError:
            outcome = "error"
        except Exception:  # noqa: BLE001 - anything else is the bug being hunted
            outcome = FuzzFailure(case, kind, traceback.format_exc())
        yield case, name, kind, outcome
