"""Entry point of ``iree-lens``: a sub-command runs without Qt; otherwise the window opens.

Before Qt is imported the launcher decides, from the command line and the environment alone, whether
a window can open: Qt's platform plugin aborts the process (exit 134) when it finds no display, so a
missing display is reported here, with the sub-commands that work without one.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

# Qt platforms that need no display server (tests and screenshots use offscreen).
HEADLESS_PLATFORMS = ("offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay")
# What a file argument looks like, as opposed to a sub-command someone mistyped.
FILE_SUFFIXES = (".vmfb", ".mlir", ".mlirbc")


def _x11_reachable(display: str) -> bool:
    """Whether an X server answers at ``display`` (``:N``, ``unix:N``, ``host:N``), without Xlib."""
    host, _, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not number.isdigit():
        return False
    if host.startswith("/"):  # a launchd-style socket path (macOS XQuartz)
        return Path(f"{host}:{rest}").exists()
    try:
        if host in ("", "unix"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1.0)
                path = f"/tmp/.X11-unix/X{number}"
                try:
                    s.connect(path)
                except OSError:
                    if not sys.platform.startswith("linux"):
                        raise
                    s.connect("\0" + path)  # Linux abstract socket, used by some servers
            return True
        with socket.create_connection((host, 6000 + int(number)), timeout=1.0):
            return True
    except OSError:
        return False


def display_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why no window can open in ``env`` (the process environment by default), or ``None`` if one can."""
    env = os.environ if env is None else env
    if sys.platform in ("win32", "darwin"):
        return None
    platform = env.get("QT_QPA_PLATFORM", "").split(":", 1)[0].strip().lower()
    if platform in HEADLESS_PLATFORMS:
        return None
    wayland = env.get("WAYLAND_DISPLAY", "")
    display = env.get("DISPLAY", "")
    if platform.startswith("wayland"):
        return None if wayland else "QT_QPA_PLATFORM asks for Wayland but WAYLAND_DISPLAY is not set"
    if platform == "xcb" or (not platform and not wayland):
        if not display:
            return "no display: DISPLAY is not set" + ("" if platform else " (nor WAYLAND_DISPLAY)")
        if not _x11_reachable(display):
            return f"no X server answers at DISPLAY={display}"
    return None


def _commands() -> tuple[str, ...]:
    from engine.cli import COMMAND_MODULES

    return COMMAND_MODULES


def _no_display_message(problem: str) -> str:
    commands = ", ".join(_commands())
    return (
        f"iree-lens: the window needs a display ({problem}).\n"
        f"The sub-commands work without one: {commands} (iree-lens COMMAND --help).\n"
        "To render the window without a screen, set QT_QPA_PLATFORM=offscreen or run under xvfb-run."
    )


def looks_like_file(arg: str) -> bool:
    """Whether a first argument names a file to open rather than a (mistyped) sub-command."""
    return (
        Path(arg).exists()
        or arg.lower().endswith(FILE_SUFFIXES)
        or os.sep in arg
        or (os.altsep is not None and os.altsep in arg)
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from engine.cli import end_command, is_command
    from engine.cli import main as cli_main

    if is_command(argv):
        return end_command(cli_main(argv))
    first = argv[0] if argv and not argv[0].startswith("-") else None
    if first is not None and not looks_like_file(first):
        commands = "\n".join(f"  {c}" for c in _commands())
        print(
            f"iree-lens: unknown command {first!r} (and no such file).\nCommands:\n{commands}\n"
            "Or give a .vmfb module or an .mlir source to open it in the window.",
            file=sys.stderr,
        )
        return 2
    # Qt's own "-platform NAME" option chooses the platform as QT_QPA_PLATFORM does.
    platform = argv[argv.index("-platform") + 1] if "-platform" in argv[:-1] else None
    problem = display_problem({**os.environ, "QT_QPA_PLATFORM": platform} if platform else None)
    if problem is not None:
        print(_no_display_message(problem), file=sys.stderr)
        return 1
    from app.main import run_app  # imports Qt

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
