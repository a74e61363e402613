"""The fuzz harness itself: a case that sleeps past the time limit, allocates past the memory limit,
kills its process or raises an untyped error is reported as a failure, saved, and reproducible."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from lens_fuzz.bounded import Limits, run_cases
from lens_fuzz.readers import Reader


def _sleep(data: bytes) -> None:
    if data == b"sleep":
        time.sleep(60)


def _allocate(data: bytes) -> None:
    if data == b"allocate":
        blocks = [bytes(256 << 20) for _ in range(16)]  # 4 GiB, zero-filled (touched) block by block
        del blocks


def _die(data: bytes) -> None:
    if data == b"die":
        os.abort()


def _untyped(data: bytes) -> None:
    if data == b"raise":
        raise IndexError("an untyped error")
    if data == b"reject":
        raise ValueError("a typed rejection")


SLEEPER = Reader("sleeper", _sleep, ())
ALLOCATOR = Reader("allocator", _allocate, ())
DIER = Reader("dier", _die, ())
RAISER = Reader("raiser", _untyped, (ValueError,))

LIMITS = Limits(seconds=1.0, memory_bytes=512 << 20)


def _cases(*inputs: bytes):
    return [(i, "test", data) for i, data in enumerate(inputs)]


def test_a_case_over_the_time_limit_is_a_hang_failure_and_the_campaign_goes_on(tmp_path):
    start = time.perf_counter()
    report = run_cases(
        SLEEPER,
        _cases(b"a", b"sleep", b"b"),
        limits=LIMITS,
        corpus_dir=tmp_path,
        reader_name="test_fuzz_harness:SLEEPER",
    )
    assert time.perf_counter() - start < 20  # the sleeping worker was killed, not waited for
    assert [(f.case, f.kind) for f in report.failures] == [(1, "hang")]
    assert report.parsed == 2 and report.cases == 3
    failure = report.failures[0]
    assert Path(failure.input_path).read_bytes() == b"sleep"
    # The saved command reproduces the hang under the same limits.
    proc = subprocess.run(failure.command, shell=True, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and ": hang" in proc.stdout, proc.stdout + proc.stderr
    assert failure.command in Path(failure.input_path[: -len(".bin")] + ".txt").read_text()


def test_a_case_over_the_memory_limit_is_a_memory_failure(tmp_path):
    limits = Limits(seconds=30.0, memory_bytes=512 << 20)  # time enough to fill 512 MiB on a busy machine
    report = run_cases(ALLOCATOR, _cases(b"allocate", b"small"), limits=limits, corpus_dir=tmp_path)
    assert [(f.case, f.kind) for f in report.failures] == [(0, "memory")]
    assert "MemoryError" in report.failures[0].detail
    assert report.parsed == 1  # the next case ran in a fresh worker


def test_a_dead_worker_and_an_untyped_error_are_failures(tmp_path):
    report = run_cases(DIER, _cases(b"die", b"fine"), limits=LIMITS, corpus_dir=tmp_path)
    assert [(f.case, f.kind) for f in report.failures] == [(0, "crash")]
    assert "SIGABRT" in report.failures[0].detail
    report = run_cases(RAISER, _cases(b"raise", b"reject", b"fine"), limits=LIMITS)
    assert [(f.case, f.kind) for f in report.failures] == [(0, "untyped")]
    assert "IndexError" in report.failures[0].detail
    assert (report.parsed, report.rejected) == (1, 1)


def test_workers_are_replaced_after_each_batch():
    report = run_cases(RAISER, _cases(*[b"x"] * 7), limits=LIMITS, batch=3)
    assert report.workers == 3 and report.parsed == 7
