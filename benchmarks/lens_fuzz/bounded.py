"""Fuzz cases run under a real time limit and memory limit, in worker processes.

A worker process (from a fork server: a clean single-threaded process, because forking the test process
itself inherits whatever locks its other threads hold and can deadlock the worker) runs a batch of cases
one at a time; readers are module-level functions, passed by reference. Before its
first case it limits its own address space (``RLIMIT_AS``) to what it holds plus ``Limits.memory_bytes``;
the parent waits at most ``Limits.seconds`` of wall-clock time for each case and kills the worker when a
case takes longer. So every case ends in one of:

* ``ok`` / ``rejected``: the reader returned, or raised one of its typed errors;
* a failure: ``hang`` (over the time limit; the worker is killed), ``memory`` (an allocation failed
  under the limit: ``MemoryError``), ``crash`` (the worker died: a signal or an exit), ``untyped`` (any
  other exception).

A new worker takes over after ``batch`` cases and after any failure, so a leak or a damaged interpreter
state never carries over. Every failure's input is saved under ``corpus_dir`` with a text file holding
the exact command that reproduces it (``reproduce.py``, under the same limits).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import resource
import shlex
import sys
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lens_fuzz.readers import READERS, Reader

REPRODUCE = Path(__file__).resolve().parent / "reproduce.py"
FAILURE_KINDS = ("hang", "memory", "crash", "untyped")


@dataclass(frozen=True)
class Limits:
    seconds: float = 10.0  # wall clock per case
    memory_bytes: int = 1 << 30  # address space a case may add to what the worker holds when it starts


@dataclass(frozen=True)
class Failure:
    reader: str
    case: int
    mutation: str
    kind: str  # one of FAILURE_KINDS
    detail: str  # traceback, or what killed the worker
    input_path: str | None = None  # the saved input (when a corpus directory was given)
    command: str | None = None  # the command that reproduces it


@dataclass
class Report:
    reader: str
    cases: int = 0
    parsed: int = 0
    rejected: int = 0
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    slowest_case_seconds: float = 0.0
    workers: int = 0

    @property
    def cases_per_second(self) -> float:
        return self.cases / self.seconds if self.seconds else 0.0

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in FAILURE_KINDS}
        for f in self.failures:
            out[f.kind] += 1
        return out


def _address_space() -> int:
    """This process's virtual size in bytes (what RLIMIT_AS counts)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_one(reader: Reader, data: bytes) -> tuple[str, str]:
    """Run one case in this process: ("ok" | "rejected" | "memory" | "untyped", traceback)."""
    try:
        reader.read(data)
        return "ok", ""
    except reader.allowed:
        return "rejected", ""
    except MemoryError:
        return "memory", traceback.format_exc(limit=-8)
    except Exception:  # noqa: BLE001 - anything else is the bug being hunted
        return "untyped", traceback.format_exc(limit=-8)


def _worker(conn, reader: Reader, memory_bytes: int) -> None:
    import faulthandler

    faulthandler.disable()  # a crash is reported by the parent; no stack dump on the shared stderr
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + memory_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    conn.send(("ready", ""))  # the parent starts a case's clock from here, not from the process's start
    while True:
        data = conn.recv()
        if data is None:
            return
        conn.send(run_one(reader, data))


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["lens_fuzz.readers"])  # workers start with the readers imported
    return ctx


STARTUP_SECONDS = 120.0  # at most, for a worker to start (then its first case's clock starts anyway)


class _Worker:
    def __init__(self, reader: Reader, limits: Limits):
        ctx = _context()
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child, reader, limits.memory_bytes), daemon=True)
        self.process.start()
        child.close()
        self.done = 0
        # A case's time limit starts once the worker is ready: starting a process on a loaded machine can
        # take longer than the limit itself (the first case of a worker that then died was called a hang).
        # A worker that dies while starting fails its first case as a crash (its pipe is closed).
        if self.conn.poll(STARTUP_SECONDS):
            try:
                self.conn.recv()
            except EOFError:
                pass

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(None)
            except OSError:
                kill = True
            self.process.join(2)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

    def exit_text(self) -> str:
        self.process.join(2)
        code = self.process.exitcode
        if code is not None and code < 0:
            import signal

            return f"worker killed by signal {signal.Signals(-code).name}"
        return f"worker exited with status {code}"


def save_failure(corpus_dir: Path, reader_name: str, kind: str, data: bytes, limits: Limits, detail: str):
    """Save a failing input and its reproducing command; returns (input path, command)."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:16]
    path = corpus_dir / f"{reader_name}-{kind}-{digest}.bin"
    path.write_bytes(data)
    command = " ".join(
        shlex.quote(str(a))
        for a in (
            sys.executable,
            REPRODUCE,
            reader_name,
            path,
            "--seconds",
            limits.seconds,
            "--memory-mb",
            limits.memory_bytes >> 20,
        )
    )
    path.with_suffix(".txt").write_text(f"{kind} in reader {reader_name}\n\n{command}\n\n{detail}\n")
    return str(path), command


def run_cases(
    reader: Reader | str,
    cases: Iterable[tuple[int, str, bytes]],
    *,
    limits: Limits = Limits(),
    corpus_dir: str | Path | None = None,
    batch: int = 500,
    reader_name: str | None = None,
    progress=None,
) -> Report:
    """Run ``cases`` (case number, mutation name, input) through ``reader`` under ``limits``.

    ``reader_name`` is how the reproducing command names the reader: a key of ``READERS`` (the default
    for those) or ``module:attribute`` of a ``Reader`` importable with ``tests/`` on the path.
    ``progress(report)`` is called after every batch.
    """
    if isinstance(reader, str):
        reader = READERS[reader]
    name = reader_name or reader.name
    report = Report(reader.name)
    corpus = Path(corpus_dir) if corpus_dir is not None else None
    start = time.perf_counter()
    worker: _Worker | None = None
    try:
        for case, mutation, data in cases:
            if worker is None:
                worker = _Worker(reader, limits)
                report.workers += 1
            t0 = time.perf_counter()
            kind, detail = "", ""
            try:
                worker.conn.send(data)
                if worker.conn.poll(limits.seconds):
                    kind, detail = worker.conn.recv()
                else:
                    kind, detail = "hang", f"no result after {limits.seconds:g} s (worker killed)"
            except (EOFError, OSError):
                kind, detail = "crash", worker.exit_text()
            elapsed = time.perf_counter() - t0
            report.slowest_case_seconds = max(report.slowest_case_seconds, elapsed)
            report.cases += 1
            worker.done += 1
            if kind == "ok":
                report.parsed += 1
            elif kind == "rejected":
                report.rejected += 1
            else:
                path = command = None
                if corpus is not None:
                    path, command = save_failure(corpus, name, kind, data, limits, detail)
                report.failures.append(Failure(reader.name, case, mutation, kind, detail, path, command))
                worker.stop(kill=True)  # a failed worker's state is not trusted
                worker = None
                continue
            if worker.done >= batch:
                worker.stop()
                worker = None
                if progress is not None:
                    report.seconds = time.perf_counter() - start
                    progress(report)
    finally:
        if worker is not None:
            worker.stop()
    report.seconds = time.perf_counter() - start
    return report
