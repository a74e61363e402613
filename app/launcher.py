"""Entry point of ``iree-lens``: a sub-command runs without Qt; otherwise the window opens."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from engine.cli import is_command
    from engine.cli import main as cli_main

    if is_command(argv):
        return cli_main(argv)
    from app.main import run_app  # imports Qt

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
