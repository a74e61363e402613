"""One compile per distinct (source, flags, compiler) in a test run: ``iree-compile`` behind a
content-addressed cache that every test shares (``from support import iree_compile``).

The key is the compiler's version, the working folder, the arguments as written with the output file
(``-o``) left out, and the bytes of every input file an argument names. Paths other than ``-o`` stay in the
key because IREE writes them into what it makes (a source's path into debug locations, a dump folder's path
into the executable's debug info): a module compiled from another folder is not the same module. Folders
an argument dumps into (``--...-to=DIR``) are stored with the entry and put back on a hit.

The cache lives in the run's temporary folder (``$LENS_TEST_COMPILE_CACHE``, which tests/conftest.py makes
inside the run's isolated home, removed when the run ends); parallel workers share it, and a file lock
makes the second worker that wants a module wait for the first one's compile instead of repeating it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from engine.compiler.job import compiler_version, iree_compile_path

# Flags whose value is the output file: never part of the key, since IREE does not write it anywhere.
_OUTPUT_FLAGS = ("-o", "--output-file")


@cache
def native_iree_compile() -> str:
    """The native ``iree-compile`` (not the console script, a Python wrapper that costs an interpreter
    start and IREE's import on every call)."""
    return iree_compile_path()


def cache_root() -> Path | None:
    """The run's compile cache, or None outside a test run (then every call compiles)."""
    root = os.environ.get("LENS_TEST_COMPILE_CACHE")
    return Path(root) if root else None


def _split_output(args: list[str]) -> tuple[list[str], str | None]:
    """``args`` with the output file replaced by a placeholder, and that file."""
    keyed: list[str] = []
    output = None
    it = iter(range(len(args)))
    for i in it:
        a = args[i]
        if a in _OUTPUT_FLAGS and i + 1 < len(args):
            output = args[i + 1]
            keyed += [a, "<output>"]
            next(it, None)
        elif a.startswith(tuple(f"{f}=" for f in _OUTPUT_FLAGS)):
            flag, output = a.split("=", 1)
            keyed.append(f"{flag}=<output>")
        else:
            keyed.append(a)
    return keyed, output


def _dump_folders(args: list[str]) -> list[str]:
    """Folders IREE writes into (``--iree-hal-dump-executable-sources-to=DIR``, ``--dump-compilation-phases-to=DIR``)."""
    return [a.split("=", 1)[1] for a in args if a.startswith("--") and "=" in a and a.split("=", 1)[0].endswith("-to")]


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes() + b"\0")
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(args: Sequence[str], cwd: Path) -> str:
    keyed, _ = _split_output(list(args))
    dumps = set(_dump_folders(list(args)))
    parts = [compiler_version(), str(cwd), *keyed]
    for a in keyed:
        # An input may be an argument of its own or a flag's value (``--iree-hal-substitute-executable-source=
        # NAME=PATH``): every piece that names an existing file or folder adds its bytes.
        for piece in {a, *a.split("=")[1:]}:
            if not piece or piece in dumps or len(piece) > 4096:
                continue
            p = Path(piece) if Path(piece).is_absolute() else cwd / piece
            try:
                if p.exists():
                    parts.append(f"{piece}:{_file_digest(p)}")
            except OSError:
                continue
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _run(args: list[str], cwd: Path, timeout: float) -> tuple[int, bytes, bytes]:
    proc = subprocess.run([native_iree_compile(), *args], cwd=cwd, capture_output=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def iree_compile(
    args: Sequence[str | os.PathLike],
    *,
    cwd: str | os.PathLike | None = None,
    check: bool = False,
    text: bool = True,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``iree-compile ARGS`` as ``subprocess.run(..., capture_output=True)`` returns it, compiled once per
    run: a second call with the same inputs, flags and folders copies the first one's output file (and dump
    folders) into place and returns its exit status, stdout and stderr."""
    args = [os.fspath(a) for a in args]
    cwd = Path(cwd or os.getcwd()).resolve()
    _, output = _split_output(args)
    output_path = None if output is None else (Path(output) if Path(output).is_absolute() else cwd / output)
    dumps = [Path(d) if Path(d).is_absolute() else cwd / d for d in _dump_folders(args)]
    root = cache_root()
    if root is None:
        rc, out, err = _run(args, cwd, timeout)
    else:
        rc, out, err = _cached_run(root, args, cwd, timeout, output_path, dumps)
    proc = subprocess.CompletedProcess(
        ["iree-compile", *args], rc, out.decode(errors="replace") if text else out,
        err.decode(errors="replace") if text else err,
    )  # fmt: skip
    if check:
        proc.check_returncode()
    return proc


def _cached_run(
    root: Path, args: list[str], cwd: Path, timeout: float, output: Path | None, dumps: list[Path]
) -> tuple[int, bytes, bytes]:
    entry = root / cache_key(args, cwd)
    root.mkdir(parents=True, exist_ok=True)
    with open(f"{entry}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker compiling the same module: wait for its entry
        if not (entry / "meta.json").exists():
            rc, out, err = _run(args, cwd, timeout)
            staging = Path(tempfile.mkdtemp(dir=root, prefix="new-"))
            (staging / "stdout").write_bytes(out)
            (staging / "stderr").write_bytes(err)
            if rc == 0 and output is not None and output.is_file():
                shutil.copy2(output, staging / "output")
            for i, d in enumerate(dumps):
                if d.is_dir():
                    shutil.copytree(d, staging / f"dump{i}")
            (staging / "meta.json").write_text(json.dumps({"returncode": rc, "args": args, "cwd": str(cwd)}))
            staging.rename(entry)
            return rc, out, err
    meta = json.loads((entry / "meta.json").read_text())
    if output is not None and (entry / "output").exists():
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry / "output", output)
    for i, d in enumerate(dumps):
        if (entry / f"dump{i}").is_dir():
            shutil.copytree(entry / f"dump{i}", d, dirs_exist_ok=True)
    return meta["returncode"], (entry / "stdout").read_bytes(), (entry / "stderr").read_bytes()
