"""Open a ~1 GiB .vmfb and list its functions: time and memory (goal: < 0.3 s, RSS barely grows).

The big module is made from the ``large_constant`` sample: its last external rodata segment is grown
to ~1 GiB in place (the segment's ``external_data_length`` is patched and the file extended), which
is exactly what a program with a 1 GiB constant looks like to the reader.

    .venv/bin/python benchmarks/open_large_vmfb.py [--size-mib 1024]
"""

from __future__ import annotations

import argparse
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.compiler.targets import TARGETS  # noqa: E402
from engine.runtime.vmfb.module import open_vmfb  # noqa: E402
from engine.samples import sample_path  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def make_large(path: Path, size: int) -> None:
    small = path.with_suffix(".small.vmfb")
    cmd = [
        str(Path(sys.executable).parent / "iree-compile"),
        str(sample_path("large_constant")),
        *TARGETS["llvm-cpu"].flags,
        "-o",
        str(small),
    ]
    subprocess.run(cmd, check=True)
    m = open_vmfb(small)
    ext = [s for s in m.rodata_segments if not s.embedded]
    last = max(ext, key=lambda s: s.file_offset + s.length)
    table = m.root.tables(9, "rodata_segments")[last.ordinal]
    length_pos = table.field_pos(4)  # external_data_length (u64)
    data = bytearray(small.read_bytes())
    del m, table
    new_len = size - last.file_offset
    struct.pack_into("<Q", data, length_pos, new_len)
    with open(path, "wb") as f:
        f.write(data[: last.file_offset + last.length])
        f.truncate(last.file_offset + new_len)  # sparse: the constant's new bytes are zeros


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "large.vmfb"
        make_large(path, args.size_mib << 20)
        size = path.stat().st_size
        rss0 = rss_mib()
        t0 = time.perf_counter()
        m = open_vmfb(path)
        names = [(f.ordinal, f.name, f.bytecode_length) for f in m.functions]
        t1 = time.perf_counter()
        segs = m.rodata_segments
        execs = m.executables
        t2 = time.perf_counter()
        rss1 = rss_mib()
        big = max(segs, key=lambda s: s.length)
        print(f"file: {size / 2**20:.0f} MiB, largest rodata segment {big.length / 2**20:.0f} MiB")
        print(f"open + list {len(names)} functions: {(t1 - t0) * 1e3:.1f} ms (goal < 300 ms)")
        print(f"rodata segments ({len(segs)}) + executables ({len(execs)}): {(t2 - t1) * 1e3:.1f} ms")
        print(f"RSS growth: {rss1 - rss0:.1f} MiB")
        m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
