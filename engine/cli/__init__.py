"""The ``iree-lens`` command line: sub-commands built only on the engine's public API.

Each sub-command lives in its own module of this package and provides ``add_parser(subparsers)``
(which registers its parser and sets ``func`` to its ``run(args) -> int``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping

# Sub-commands, in the order `iree-lens --help` lists them; each is the module of its name ("-" as "_").
COMMAND_MODULES = (
    "inspect", "run", "sources", "benchmark", "phases", "devices", "capture", "diverge", "profile", "zones", "debug", "kernel", "serve",
    "dap", "compare-builds", "split", "reduce",
)


def build_parser() -> argparse.ArgumentParser:
    return build_parsers()[0]


def build_parsers() -> tuple[argparse.ArgumentParser, Mapping[str, argparse.ArgumentParser]]:
    """``iree-lens``'s parser, and each sub-command's own parser by its name."""
    parser = argparse.ArgumentParser(
        prog="iree-lens",
        description="Debugger and trace viewer for programs compiled by IREE. "
        "With no command, opens the window (on FILE if given).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module_name = f"engine.cli.{name.replace('-', '_')}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            continue  # not built yet
        module.add_parser(sub)
    for name in RUNS_PROGRAMS:
        if name in sub.choices:
            add_plugin_argument(sub.choices[name])
    return parser, sub.choices


# The commands that run a program: they take the executable plugins its CPU kernels import functions from.
RUNS_PROGRAMS = ("run", "benchmark", "capture", "diverge", "profile", "debug", "kernel", "serve", "compare-builds", "split",
                 "reduce")


def add_plugin_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executable-plugin", "--executable_plugin", dest="executable_plugins", action="append",
                   default=[], metavar="FILE.so",
                   help="a shared library that provides functions the program's CPU kernels import "
                   "(iree/hal/local/executable_plugin.h), as iree-run-module's --executable_plugin; repeatable, "
                   "the last given asked first")  # fmt: skip


def parse_command_line(
    parser: argparse.ArgumentParser, commands: Mapping[str, argparse.ArgumentParser], argv: list[str]
) -> tuple[argparse.Namespace, list[str]]:
    """The parsed line and the words no option of it took (IREE's flags, for the commands that pass them on).

    A sub-command's options may stand anywhere among its positional arguments (``diverge A.vmfb
    --device-a=local-task B.vmfb --input=...``): its own parser reads the line with
    ``parse_intermixed_args``, since argparse's subparsers parse a command's words in one pass where an
    option between two positionals ends the first. The commands that pass IREE's flags through (``sources``,
    ``phases``, ``split``, ``reduce``: the program and the flags are one REMAINDER, which
    ``parse_intermixed_args`` refuses with a TypeError before reading a word) are parsed as before and pick
    their own options out of the flags wherever they stand (``compile_arguments.take_own_options``)."""
    command = commands.get(argv[0]) if argv else None
    if command is not None:
        try:
            return command.parse_intermixed_args(argv[1:], argparse.Namespace(command=argv[0])), []
        except TypeError:
            pass
    return parser.parse_known_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = build_parsers()
    args, unknown = parse_command_line(parser, commands, argv)
    if unknown:
        # Commands that pass flags through to IREE take them anywhere on the line (before SOURCE too).
        if not hasattr(args, "iree_flags"):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.iree_flags = [*unknown, *args.iree_flags]
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if hasattr(args, "executable_plugins") and getattr(args, "iree_flags", None):
        # A command that passes IREE's flags on (split, reduce) took a plugin given after the program as one.
        own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
        add_plugin_argument(own)
        picked, args.iree_flags = own.parse_known_args(args.iree_flags)
        args.executable_plugins = [*args.executable_plugins, *picked.executable_plugins]
    if getattr(args, "executable_plugins", None):
        from engine.errors import LensError
        from engine.runtime.hal.executable_plugins import register_plugins

        try:
            register_plugins(args.executable_plugins)
        except LensError as e:
            print(f"iree-lens {args.command}: {e}", file=sys.stderr)
            return 1
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader stopped reading (``| head``), as it may: what is left of stdout goes nowhere, not into
        # a "Broken pipe" complaint when Python flushes it at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


# How long a finished command waits for its helper threads (a session's worker, a stream's reader) to end.
THREAD_GRACE_S = 3.0


def end_command(code: int) -> int:
    """Return ``code`` for a normal exit once every other thread has ended; if one still runs, end now.

    A session's worker or run thread can still be inside IREE's runtime (native code that released the
    GIL) when a command returns, under load for instance. Python's exit then stops that thread with a
    forced unwind, IREE's C++ frames catch it without rethrowing, and the process aborts ("FATAL:
    exception not rethrown", SIGABRT) after its output was complete. Everything the command wrote is
    flushed, then ``os._exit`` ends the process without unwinding those threads.
    """
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    if not any(t.is_alive() for t in threading.enumerate() if t is not threading.current_thread()):
        return code
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
            pass
    os._exit(code)


def is_command(argv: list[str]) -> bool:
    """True when ``argv`` names a sub-command (or asks for help) rather than a file to open."""
    return bool(argv) and (argv[0] in COMMAND_MODULES or argv[0] in ("-h", "--help"))


if __name__ == "__main__":
    sys.exit(end_command(main()))
