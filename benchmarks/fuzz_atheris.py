"""Coverage-guided fuzzing (atheris, libFuzzer) of every file reader, each input under a time and memory limit.

    .venv/bin/python benchmarks/fuzz_atheris.py [--minutes M (default 2; a campaign: 30)] [--work DIR] [--timeout S] [--rss-mb M]
    .venv/bin/python benchmarks/fuzz_atheris.py --replay FILE      (one saved input, under the limits)
    .venv/bin/python benchmarks/fuzz_atheris.py --coverage [--work DIR]   (line coverage of the corpus)

One fuzz target covers all readers: an input's first byte picks the reader (``lens_fuzz.readers``:
.vmfb modules with nested VMVX modules, VKE1/SPIR-V, ELF, ``--input`` text, .npy/.npz, pass-timing
JSON, diagnostics, session files), the rest is that reader's input. The seeds are valid inputs of every
reader. libFuzzer enforces the limits: ``-timeout`` (wall clock per input) and ``-rss_limit_mb``; an
input over either, or one that kills the process, is written to ``WORK/artifacts`` and the campaign
restarts from its corpus. An untyped exception does not stop the campaign: its input and traceback go
to ``WORK/failures`` (one per distinct place it was raised). Every saved input has a ``.txt`` beside it
with the command that reproduces it. At the end the script prints executions, time, libFuzzer's
coverage (``cov``: instrumented edges, ``ft``: features) and the failures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from lens_fuzz.readers import READERS  # noqa: E402

# An input's first byte picks a reader by position here: the order only grows at the end, so inputs
# saved by earlier campaigns keep naming the same reader (names.json in a work directory says which
# readers a campaign used).
ALL_NAMES = ("diagnostics", "elf", "input", "npy", "session", "timing", "vke1", "vmfb", "bundle", "trace")
NAMES: tuple[str, ...] = ALL_NAMES


def use_names(work: Path, create: bool = True) -> None:
    """Take the reader order of the campaign in ``work`` (the first 8 for one started before names.json)."""
    global NAMES
    names_file = work / "names.json"
    if names_file.exists():
        NAMES = tuple(json.loads(names_file.read_text()))
    elif (work / "corpus").exists():
        NAMES = ALL_NAMES[:8]
    else:
        if create:
            work.mkdir(parents=True, exist_ok=True)
            names_file.write_text(json.dumps(ALL_NAMES))
        NAMES = ALL_NAMES
SEED_PROGRAMS = (
    ("mlp", "llvm-cpu"),
    ("softmax", "vulkan-spirv"),
    ("matmul", "vmvx"),
    ("control_flow", "vmvx"),
    ("globals", "vulkan-spirv"),
)
# What the coverage-guided run instruments (and what --coverage measures).
INSTRUMENTED = ("engine", "elftools")
READER_MODULES = (
    "engine.runtime.vmfb.module",
    "engine.runtime.vmfb.flatbuffer",
    "engine.runtime.vmfb.container",
    "engine.runtime.vmfb.decoder",
    "engine.runtime.vmfb.cconv",
    "engine.runtime.vmfb.locations",
    "engine.runtime.vmfb.describe",
    "engine.runtime.vmfb.disassembler",
    "engine.runtime.vmfb.executables",
    "engine.runtime.vmfb.vke1",
    "engine.runtime.function_io",
    "engine.runtime.element_types",
    "engine.compiler.timing",
    "engine.compiler.diagnostics",
    "engine.session.persist",
    "engine.trace.open",
    "engine.trace.chrome",
    "engine.trace.ireeprof",
    "engine.trace.compile_timing",
    "engine.trace.model",
    "engine.dispatch.bundle",
    "elftools.elf.elffile",
)


def split(data: bytes):
    """(reader, payload) of a fuzz input."""
    return READERS[NAMES[data[0] % len(NAMES)]], data[1:]


def _command(*args) -> str:
    return " ".join(shlex.quote(str(a)) for a in (sys.executable, Path(__file__).resolve(), *args))


# -- the fuzz target (child process) ---------------------------------------------------------------------


def child(argv: list[str], failures: Path) -> None:
    import atheris

    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        import importlib

        for name in READER_MODULES:
            importlib.import_module(name)
    seen: set[str] = set()

    def one_input(data: bytes) -> None:
        if not data:
            return
        reader, payload = split(data)
        try:
            reader.read(payload)
        except reader.allowed:
            pass
        except Exception as e:  # noqa: BLE001 - an untyped error is a failure; record it and go on
            tb = traceback.extract_tb(e.__traceback__)
            where = (
                f"{reader.name}:{type(e).__name__}:{tb[-1].filename}:{tb[-1].lineno}" if tb else reader.name
            )
            if where in seen:
                return
            seen.add(where)
            failures.mkdir(parents=True, exist_ok=True)
            path = failures / f"untyped-{reader.name}-{hashlib.sha1(data).hexdigest()[:16]}"
            path.write_bytes(data)
            text = "".join(traceback.format_exception(e, limit=-8))
            Path(f"{path}.txt").write_text(
                f"untyped error in reader {reader.name}\n\n{_command('--replay', path)}\n\n{text}"
            )
            print(f"UNTYPED {where}", file=sys.stderr, flush=True)

    atheris.Setup([sys.argv[0], *argv], one_input)
    atheris.Fuzz()


# -- seeds, the driver, replay, coverage ------------------------------------------------------------------


def write_seeds(seeds: Path) -> int:
    from lens_fuzz.readers import seed_corpus

    from engine.compiler.targets import target_flags
    from engine.samples import sample_path

    seeds.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for sample, target in SEED_PROGRAMS:
            out = Path(tmp) / f"{sample}.{target}.vmfb"
            cmd = [
                str(Path(sys.executable).parent / "iree-compile"),
                str(sample_path(sample)),
                *target_flags(target),
            ]
            subprocess.run([*cmd, "-o", str(out)], check=True)
            paths.append(out)
        corpus = seed_corpus(paths)
    n = 0
    for name, inputs in corpus.items():
        for data in inputs:
            (seeds / f"{name}-{n}").write_bytes(bytes([NAMES.index(name)]) + data)
            n += 1
    return n


STATS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")


def drive(args) -> int:
    work = Path(args.work)
    seeds, corpus, artifacts, failures = (work / d for d in ("seeds", "corpus", "artifacts", "failures"))
    for d in (corpus, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    if not seeds.exists():
        print(f"seeds: {write_seeds(seeds)} inputs for {len(NAMES)} readers", flush=True)
    deadline = time.monotonic() + args.minutes * 60
    start = time.monotonic()
    executions = restarts = 0
    last = None
    log = (work / "libfuzzer.log").open("a")
    while (remaining := int(deadline - time.monotonic())) > 5:
        before = set(artifacts.iterdir())
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "--work",
            str(work),
            "--",
            str(corpus),
            str(seeds),
            f"-max_total_time={remaining}",
            f"-timeout={args.timeout}",
            f"-rss_limit_mb={args.rss_mb}",
            f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1",
            "-max_len=1048576",
            "-len_control=0",  # modules are tens of KB: mutate at full length from the start
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace"
        )
        run_execs = 0
        for line in proc.stderr:
            log.write(line)
            m = STATS.search(line)
            if m:
                run_execs = int(m.group(1))
                last = m.groups()
                if args.verbose:
                    print(line.rstrip(), flush=True)
            elif line.startswith(("UNTYPED", "==", "SUMMARY")):
                print(line.rstrip(), flush=True)
        proc.wait()
        executions += run_execs
        for a in sorted(set(artifacts.iterdir()) - before):
            if a.suffix != ".txt":
                Path(f"{a}.txt").write_text(
                    f"libFuzzer artifact ({a.name.split('-')[0]})\n\n{_command('--replay', a)}\n"
                )
                print(f"artifact: {a.name}  reproduce: {_command('--replay', a)}", flush=True)
        if proc.returncode != 0:
            restarts += 1
    log.close()
    elapsed = time.monotonic() - start
    kinds: dict[str, int] = {}
    for a in artifacts.iterdir():
        if a.suffix != ".txt":
            kinds[a.name.split("-")[0]] = kinds.get(a.name.split("-")[0], 0) + 1
    untyped = len([f for f in failures.glob("untyped-*") if f.suffix != ".txt"]) if failures.exists() else 0
    print(
        f"time: {elapsed / 60:.1f} min  executions: {executions:,}  ({executions / elapsed:.1f}/s)  restarts: {restarts}"
    )
    if last:
        print(
            f"libFuzzer coverage: cov {last[1]} edges, ft {last[2]} features, corpus {last[3]} inputs ({last[4]})"
        )
    print(f"artifacts (hang/oom/crash): {kinds or 'none'}  untyped errors: {untyped}")
    return 1 if kinds or untyped else 0


def replay(path: Path, args) -> int:
    from lens_fuzz.bounded import Limits, run_cases

    reader, payload = split(path.read_bytes())
    report = run_cases(reader, [(0, "replay", payload)], limits=Limits(args.timeout, args.rss_mb << 20))
    f = report.failures[0] if report.failures else None
    print(f"{reader.name}: {f.kind if f else ('ok' if report.parsed else 'rejected')}")
    if f:
        print(f.detail)
    return 1 if f else 0


def coverage(args) -> int:
    """Line coverage of the reader modules when the whole corpus (and the seeds) is read once."""
    import coverage as cov_mod

    work = Path(args.work)
    files = [p for d in ("seeds", "corpus") for p in sorted((work / d).glob("*")) if p.is_file()]
    cov = cov_mod.Coverage(include=[str(ROOT / "engine" / "*")])
    cov.start()
    from lens_fuzz.bounded import run_one

    for p in files:
        data = p.read_bytes()
        if data:
            run_one(*split(data))
    cov.stop()
    modules = [m for m in READER_MODULES if m.startswith("engine.")]
    total_lines = total_hit = 0
    for m in modules:
        filename = str(ROOT / (m.replace(".", "/") + ".py"))
        _, statements, _, missing, _ = cov.analysis2(filename)
        hit = len(statements) - len(missing)
        total_lines += len(statements)
        total_hit += hit
        print(f"  {m:40s} {hit:5d}/{len(statements):5d} lines  {100 * hit / max(1, len(statements)):5.1f}%")
    print(
        f"corpus: {len(files)} inputs; reader modules: {total_hit}/{total_lines} lines ({100 * total_hit / total_lines:.1f}%)"
    )
    return 0


def main() -> int:
    if "--child" in sys.argv:
        i = sys.argv.index("--")
        work = Path(sys.argv[sys.argv.index("--work") + 1])
        use_names(work)
        child(sys.argv[i + 1 :], work / "failures")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=2.0)  # a campaign: --minutes 30 or more
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "iree-lens-fuzz" / "atheris"))
    ap.add_argument("--timeout", type=int, default=10, help="seconds per input")
    ap.add_argument("--rss-mb", type=int, default=2048, help="memory limit of the fuzzing process")
    ap.add_argument("--replay", type=Path)
    ap.add_argument("--coverage", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if args.replay:
        use_names(args.replay.resolve().parent.parent, create=False)  # WORK/artifacts/x or WORK/failures/x
        return replay(args.replay, args)
    use_names(Path(args.work))
    if args.coverage:
        return coverage(args)
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
