"""``iree-lens serve --stdio``: serve the debug session protocol on stdin/stdout.

The peer is a client started with ``--remote=COMMAND`` (``iree-lens debug``, ``iree-lens dap``): it runs
``COMMAND`` (``iree-lens serve --stdio``, or ``ssh HOST iree-lens serve --stdio`` for another machine) and
speaks the framed protocol of ``engine.session.stream`` over its pipes. Nothing listens on a network port;
SSH provides authentication and encryption. Paths in the session's commands are this (the server's) side's.
"""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="serve a debug session on stdin/stdout for a --remote client (e.g. over ssh)"
    )
    p.add_argument(
        "--stdio", action="store_true", required=True, help="speak the session protocol on stdin/stdout"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from engine.session.stream import serve_stdio

    if sys.stdin.isatty():
        print("iree-lens serve: stdin is a terminal; a client starts this command (--remote=...)", file=sys.stderr)
    return serve_stdio()
