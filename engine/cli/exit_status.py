"""The exit statuses of the commands that compare two runs (``diverge``, ``compare-builds``, ``split --check``),
as ``diff`` and ``cmp`` give theirs: 0 when nothing differs, 1 when a difference is found, 2 for trouble (a
usage error, a file that cannot be read, a run that failed), so that a script or CI job tells "they differ"
from "the comparison could not be made"."""

from __future__ import annotations

import sys
import textwrap
import traceback

SAME = 0
DIFFERENT = 1
TROUBLE = 2


def epilog(different: str, *more: str) -> str:
    """The exit-status paragraph of a comparing command's ``--help`` (for a ``RawDescriptionHelpFormatter``:
    wrapped here); ``different``: what makes it 1; ``more``: sentences that follow it."""
    text = (
        f"Exit status (as diff and cmp): {SAME} when nothing diverges, {DIFFERENT} when {different}, "
        f"{TROUBLE} for trouble (bad usage, a file that cannot be read, a run or compile that failed)."
    )
    return textwrap.fill(" ".join((text, *more)), 100)


def trouble(command: str, error: BaseException) -> int:
    """Say ``error`` on stderr (with its traceback when it is not one of the engine's typed errors: a bug
    must not read as "they differ") and return ``TROUBLE``."""
    from engine.errors import LensError

    if not isinstance(error, LensError | OSError | ValueError):
        traceback.print_exception(error, file=sys.stderr)
    print(f"iree-lens {command}: {error}", file=sys.stderr)
    return TROUBLE
