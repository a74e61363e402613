"""DAP's base protocol: JSON messages, each after a ``Content-Length: N`` header and a blank line."""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO

from engine.errors import LensError


class DapStreamError(LensError):
    """The client's stream ended or sent something that is not a DAP message."""


_MAX_MESSAGE = 64 << 20


def read_message(stream: BinaryIO) -> dict[str, Any] | None:
    """The next message, or None at the end of the stream."""
    length = None
    while True:
        line = stream.readline(4096)
        if not line:
            if length is None:
                return None
            raise DapStreamError("the stream ended inside a message header")
        line = line.strip()
        if not line:
            if length is None:
                continue  # blank lines between messages
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise DapStreamError(f"a bad Content-Length header: {value.strip()!r}") from None
    if not 0 <= length <= _MAX_MESSAGE:
        raise DapStreamError(f"a message of {length} bytes is not accepted")
    body = stream.read(length)
    if len(body) < length:
        raise DapStreamError("the stream ended inside a message")
    try:
        message = json.loads(body)
    except ValueError as e:
        raise DapStreamError(f"a message that is not JSON: {e}") from None
    if not isinstance(message, dict):
        raise DapStreamError("a message that is not a JSON object")
    return message


class MessageWriter:
    """Writes messages from any thread, one whole message at a time, numbering them (``seq``)."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self._lock = threading.Lock()
        self._seq = 0

    def write(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            message = {"seq": self._seq, **message}
            body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
            self.stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.stream.flush()
