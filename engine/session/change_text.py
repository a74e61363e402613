"""What a ``LastChange`` says, in the words the window and debug scripts share: "when did this change?"
(the last write of a register, a global or a buffer's bytes) and "where did this come from?" (what wrote a
paused dispatch's input before it ran)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.session.protocol import Change


def holds_bytes(ref_text: str) -> bool:
    """Whether a ref register's text (as a stop describes it) is a buffer whose contents can be watched: a
    buffer view reads as its type (``8xf32``), other refs as ``!type...`` (``null`` when empty)."""
    if ref_text == "null":
        return False
    return not ref_text.startswith("!") or ref_text.startswith(("!hal.buffer", "!vm.buffer"))


def _allocated_only(change: Change) -> bool:
    """Bytes unchanged since their buffer was allocated: neither side has a value (the detail says why)."""
    return change.before is None and change.after is None and bool(change.detail)


def last_write_text(what: str, change: Change, value: Callable[[Any], str] = str) -> str:
    """``what`` was last written at instruction N (function pc) by what wrote it: before → after (detail)."""
    where = f"{change.function} pc {change.pc:#x}"
    at = f"instruction {change.position:,} ({where})"
    detail = f" ({change.detail})" if change.detail else ""
    if _allocated_only(change):
        return f"{what} has not changed since its buffer was allocated at {at}{detail}"
    by = change.via or (f"dispatch #{change.dispatch}" if change.dispatch is not None else "")
    return f"{what} was last written at {at}" + (f" by {by}" if by else "") + (
        f": {value(change.before)} → {value(change.after)}{detail}")  # fmt: skip


def origin_text(what: str, change: Change | None) -> str:
    """Where ``what`` (bytes a dispatch read) came from: the dispatch or copy that wrote them, and when."""
    if change is None:
        return f"{what}: no write of its bytes in the recorded history (an input of the call, or a constant)"
    detail = f" ({change.detail})" if change.detail else ""
    if _allocated_only(change):
        return f"{what}: as its buffer was allocated at instruction {change.position:,}{detail}"
    by = change.via or f"{change.function} pc {change.pc:#x}"
    return f"{what} came from {by}, at instruction {change.position:,}: {change.before} → {change.after}{detail}"
