"""The ``iree-lens`` command line: sub-commands built only on the engine's public API.

Each sub-command lives in its own module of this package and provides ``add_parser(subparsers)``
(which registers its parser and sets ``func`` to its ``run(args) -> int``).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Sub-command modules, in the order `iree-lens --help` lists them.
COMMAND_MODULES = (
    "inspect", "run", "sources", "benchmark", "phases", "devices", "capture", "diverge", "profile", "zones", "debug", "serve",
    "dap",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="iree-lens",
        description="Debugger and trace viewer for programs compiled by IREE. "
        "With no command, opens the window (on FILE if given).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"engine.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"engine.cli.{name}":
                raise
            continue  # not built yet
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Commands that pass flags through to IREE take them anywhere on the line (before SOURCE too).
        if not hasattr(args, "iree_flags"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.iree_flags = [*unknown, *args.iree_flags]
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        return 0


def is_command(argv: list[str]) -> bool:
    """True when ``argv`` names a sub-command (or asks for help) rather than a file to open."""
    return bool(argv) and (argv[0] in COMMAND_MODULES or argv[0] in ("-h", "--help"))


if __name__ == "__main__":
    sys.exit(main())
