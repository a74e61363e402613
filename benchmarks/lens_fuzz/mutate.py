"""Random mutations of valid inputs (bit flips, truncation, interesting u32s, zeroed ranges, random
bytes, spliced chunks), the mutational half of the fuzz campaigns."""

from __future__ import annotations

import random
import struct


def mutate(rng: random.Random, data: bytes, hot: tuple[int, int] | None = None) -> tuple[str, bytes]:
    """One random mutation of ``data``; ``hot`` is a byte range where most mutations land."""
    buf = bytearray(data)
    if not buf:
        return "empty", b""
    lo, hi = hot if hot else (0, len(buf))
    lo = min(max(lo, 0), len(buf) - 1)
    hi = max(lo + 1, min(hi, len(buf)))
    kind = rng.randrange(6)
    if kind == 2 and len(buf) < 4:
        kind = 0
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


def flatbuffer_range(data: bytes) -> tuple[int, int]:
    """The byte range of the module flatbuffer (where mutations are most interesting)."""
    from engine.runtime.vmfb.container import locate

    layout = locate(memoryview(data))
    return layout.flatbuffer_start - 4, layout.flatbuffer_end


def reader_cases(seeds: list[bytes], cases: int, seed: int = 0):
    """``cases`` random mutations of random seeds: (case, mutation, input)."""
    rng = random.Random(seed)
    for case in range(cases):
        kind, data = mutate(rng, rng.choice(seeds))
        yield case, kind, data


def module_cases(samples: dict[str, bytes], cases: int, seed: int = 0):
    """Mutations of ``.vmfb`` modules, 80% of them inside the module flatbuffer: (case, "sample:kind", input).

    Samples take turns, so every sample gets the same share of cases.
    """
    rng = random.Random(seed)
    names = sorted(samples)
    hots = {k: flatbuffer_range(v) for k, v in samples.items()}
    for case in range(cases):
        name = names[case % len(names)]
        kind, data = mutate(rng, samples[name], hots[name] if rng.random() < 0.8 else None)
        yield case, f"{name}:{kind}", data
