"""What ``capture``, ``debug`` and ``profile`` share: a program to run, given either as a module (with the
function to call and its inputs) or as IREE's HAL replay (``.ireereplay``, a whole recorded run that
``engine/cli/replay.py`` handles)."""

from __future__ import annotations

import argparse
import sys

REPLAY_SUFFIX = ".ireereplay"


def add_program_arguments(p: argparse.ArgumentParser, module_help: str) -> None:
    """The module (or replay), ``--function`` and ``--input``."""
    p.add_argument("module", help=module_help)
    p.add_argument("--function", default="", help="exported function to call (required for a .vmfb)")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")


def is_replay(path: str | None) -> bool:
    """True for IREE's HAL replays, which ``engine/cli/replay.py`` runs instead of a module."""
    return bool(path) and str(path).endswith(REPLAY_SUFFIX)


def missing_function(command: str, args: argparse.Namespace) -> bool:
    """True, after saying so, when a module was given without ``--function`` (the command exits with 2)."""
    if args.function:
        return False
    print(f"iree-lens {command}: --function is required for a module", file=sys.stderr)
    return True
