"""The compiler's diagnostics, parsed from what ``iree-compile`` prints (``file:line:col: severity: message``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOCATED = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?P<severity>error|warning|note|remark): (?P<msg>.*)$"
)
_BARE = re.compile(r"^(?:iree-compile: )?(?P<severity>error|warning|note|remark): (?P<msg>.*)$")


@dataclass(frozen=True)
class Diagnostic:
    """One message from the compiler. ``file``/``line``/``column`` are ``None`` when it has no location.

    ``context`` holds the lines IREE printed under the message (the source line and its caret).
    """

    severity: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    context: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}: " if self.file is not None else ""
        return f"{where}{self.severity}: {self.message}"


def parse_diagnostics(text: str) -> list[Diagnostic]:
    """Every diagnostic in ``text`` (iree-compile's stderr without the timing report), in order.

    Lines that belong to no diagnostic (banners such as demotion's ``WARNING: ...``, crash stack dumps)
    are kept as the ``context`` of the diagnostic before them, or dropped when there is none.
    """
    found: list[Diagnostic] = []
    pending: dict | None = None
    context: list[str] = []

    def flush() -> None:
        if pending is not None:
            found.append(Diagnostic(context="\n".join(context).rstrip(), **pending))

    for raw in text.splitlines():
        m = _LOCATED.match(raw)
        if m:
            flush()
            pending = dict(
                severity=m["severity"],
                message=m["msg"],
                file=m["file"],
                line=int(m["line"]),
                column=int(m["column"]),
            )
            context = []
            continue
        m = _BARE.match(raw)
        if m:
            flush()
            pending = dict(severity=m["severity"], message=m["msg"])
            context = []
            continue
        if pending is not None:
            context.append(raw)
    flush()
    return found
