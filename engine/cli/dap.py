"""``iree-lens dap``: a Debug Adapter Protocol server on stdin/stdout (VS Code, or any DAP client).

A ``launch.json`` entry runs it as the debug adapter (see the README); ``--remote=COMMAND`` runs the session
in ``iree-lens serve --stdio`` started by COMMAND (``ssh HOST iree-lens serve --stdio``), the program's
paths being that side's.
"""

from __future__ import annotations

from engine.session.stream import add_remote_argument


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dap", help="a Debug Adapter Protocol server on stdin/stdout (VS Code...)")
    add_remote_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from engine.dap.adapter import DebugAdapter
    from engine.session.stream import claim_stdio

    reader, writer = claim_stdio()
    return DebugAdapter(reader, writer, remote=args.remote).run()
