"""What ``sources`` and ``phases`` share: a program compiled with IREE Lens's few options (``--out``,
``--target``, ``--target-cpu``, ``--timeout``) mixed with IREE's own flags, which pass to iree-compile
verbatim and may stand anywhere on the line, before the program or after it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.compiler import CompileRequest
from engine.compiler.request import selects_target
from engine.compiler.targets import COMPILE_ONLY_TARGETS, TARGETS

AddOptions = Callable[[argparse.ArgumentParser, bool], None]


def option_default(value: Any, defaults: bool) -> Any:
    """``value`` for the command's parser; nothing (``SUPPRESS``) for the second parse that picks the options
    out of IREE's flags, so that an option not given there keeps what the first parse found."""
    return value if defaults else argparse.SUPPRESS


def add_compile_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    parser.add_argument("--out", "-o", type=Path, default=option_default(None, defaults), help="folder to write into")
    parser.add_argument(
        "--target",
        default=option_default(None, defaults),
        choices=[*TARGETS, *COMPILE_ONLY_TARGETS],
        help="IREE target backend (default llvm-cpu, unless IREE's own target flags such as "
        "--iree-hal-target-device=... are given: then those alone choose the target)",
    )
    parser.add_argument(
        "--target-cpu", default=option_default(None, defaults), help="llvm-cpu target CPU (default host)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=option_default(None, defaults),
        help="stop the compile after this many seconds",
    )


def add_compile_parser(
    subparsers, name: str, summary: str, doc: str | None, add_options: AddOptions, run: Callable[[argparse.Namespace], int]
) -> None:
    """The sub-command's parser: its options (``add_options``), the program, then IREE's flags."""
    parser = subparsers.add_parser(
        name, help=summary, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_options(parser, True)
    parser.add_argument("source", type=Path, help=".mlir or .mlirbc program")
    parser.add_argument("iree_flags", nargs=argparse.REMAINDER, help="IREE flags, passed verbatim")
    parser.set_defaults(func=run)


def take_own_options(args: argparse.Namespace, add_options: AddOptions) -> list[str]:
    """IREE's flags, once the command's own options given after the program (which land among them) are
    picked out and set on ``args``."""
    own = argparse.ArgumentParser(add_help=False)
    add_options(own, False)
    parsed, iree_flags = own.parse_known_args(args.iree_flags)
    for key, value in vars(parsed).items():
        setattr(args, key, value)
    return iree_flags


def compile_request(args: argparse.Namespace, iree_flags: list[str], **options: Any) -> CompileRequest:
    """The request for ``args.source``; ``ValueError`` when ``--target`` and IREE's own flags both choose, or
    the file is not an MLIR program (said before iree-compile prints its bytes back as errors)."""
    if args.target is not None and selects_target(iree_flags):
        raise ValueError("--target and IREE's own target flags both choose the target; give one of them")
    refusal = not_a_program(Path(args.source))
    if refusal:
        raise ValueError(f"{args.source} {refusal}")
    return CompileRequest.from_file(
        args.source,
        target=args.target or "llvm-cpu",
        target_cpu=args.target_cpu,
        extra_flags=tuple(iree_flags),
        **options,
    )


# Other files given by mistake, named by their first bytes.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an ELF binary"),
)


def not_a_program(path: Path) -> str | None:
    """Why ``path`` is not an MLIR program (text or bytecode), naming what it seems to be; None when it may
    be one (or cannot be read: the compile says so)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head.startswith(b"ML\xefR"):  # MLIR bytecode
        return None
    if head.startswith(b"\x93NUMPY"):
        return "is a NumPy .npy array, not an MLIR program (give it to run or debug as --input=@FILE)"
    if compiled_module(path):
        return ("is a compiled IREE module (.vmfb), not an MLIR program: give the .mlir it was compiled from (the "
                "module itself opens in the window, and runs with run, inspect or debug)")
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return f"is {kind}, not an MLIR program (.mlir text or .mlirbc bytecode)"
    if b"\0" in head:
        return "is a binary file, not an MLIR program (.mlir text or .mlirbc bytecode)"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not a character cut at the end of the 4 KB read
            return "is not UTF-8 text, so not an MLIR program (.mlir text or .mlirbc bytecode)"
    return None


def compiled_module(path: Path) -> bool:
    """Whether ``path`` is a compiled IREE module (``.vmfb``: a ZIP archive, or a bare FlatBuffer with IREE's
    file identifier) rather than a program iree-compile reads."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return path.suffix == ".vmfb" or head[:4] == b"PK\x03\x04" or head[4:8] == b"IREE"
