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
    """The request for ``args.source``; ``ValueError`` when ``--target`` and IREE's own flags both choose."""
    if args.target is not None and selects_target(iree_flags):
        raise ValueError("--target and IREE's own target flags both choose the target; give one of them")
    return CompileRequest.from_file(
        args.source,
        target=args.target or "llvm-cpu",
        target_cpu=args.target_cpu,
        extra_flags=tuple(iree_flags),
        **options,
    )
