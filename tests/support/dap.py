"""A DAP client written against the protocol's JSON schema (``dap_schema/``, vendored from
microsoft/debug-adapter-protocol): every request it sends and every message the adapter sends back is
validated, for the tests that drive ``iree-lens dap``."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

from support import lens_env

SCHEMA = json.loads((Path(__file__).parents[1] / "dap_schema" / "debugAdapterProtocol.json").read_text())
_FORMATS = {name: (lambda value: True) for name in ("int32", "int64", "uint32", "uint64")}
_validators: dict[str, object] = {}


def validate(definition: str, message: dict) -> None:
    """``message`` against ``definitions/DEFINITION`` of the DAP schema (raises on the first mismatch)."""
    check = _validators.get(definition)
    if check is None:
        if definition not in SCHEMA["definitions"]:
            raise AssertionError(f"the DAP schema has no {definition}")
        schema = {"$schema": SCHEMA["$schema"], "definitions": SCHEMA["definitions"], "$ref": f"#/definitions/{definition}"}
        import fastjsonschema  # the project's test extra (pyproject.toml)

        check = _validators[definition] = fastjsonschema.compile(schema, formats=_FORMATS)
    check(message)


def lens_command() -> list[str]:
    """The installed ``iree-lens`` launcher (this worktree's code through PYTHONPATH)."""
    script = Path(sys.executable).parent / "iree-lens"
    return [str(script)] if script.exists() else [sys.executable, "-c", "import sys; from engine.cli import main; sys.exit(main())"]


class DapClient:
    """A DAP client over the adapter's stdin/stdout: requests by name, events in arrival order."""

    def __init__(self, argv: list[str]):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=lens_env())
        self.seq = 0
        self.messages: queue.Queue[dict] = queue.Queue()
        self.events: list[dict] = []
        self.sent_by_adapter: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = stream.read(1)
                if not byte:
                    self.messages.put({"type": "eof"})
                    return
                header += byte
            length = int(header.split(b":")[1].strip().split(b"\r\n")[0])
            message = json.loads(stream.read(length))
            self.messages.put(message)

    def _next(self, timeout: float) -> dict:
        message = self.messages.get(timeout=timeout)
        if message["type"] == "eof":
            raise AssertionError("the adapter closed its output")
        self.sent_by_adapter.append(message)
        validate("ProtocolMessage", message)
        if message["type"] == "event":
            validate(message["event"][0].upper() + message["event"][1:] + "Event", message)
            self.events.append(message)
        elif message["type"] == "response":
            if message["success"]:
                validate(message["command"][0].upper() + message["command"][1:] + "Response", message)
            else:
                validate("ErrorResponse", message)
        return message

    def request(self, command: str, arguments: dict | None = None, *, timeout: float = 120, ok: bool = True) -> dict:
        self.seq += 1
        message = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        validate(command[0].upper() + command[1:] + "Request", message)
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()
        while True:
            reply = self._next(timeout)
            if reply["type"] == "response" and reply["request_seq"] == self.seq:
                if ok:
                    assert reply["success"], reply.get("message")
                return reply

    def wait_event(self, name: str, timeout: float = 120) -> dict:
        for k, event in enumerate(self.events):
            if event["event"] == name:
                return self.events.pop(k)
        while True:
            message = self._next(timeout)
            if message["type"] == "event" and message["event"] == name:
                self.events.remove(message)
                return message

    def stopped(self) -> dict:
        return self.wait_event("stopped")["body"]

    def top_frame(self) -> dict:
        return self.request("stackTrace", {"threadId": 1})["body"]["stackFrames"][0]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.request("disconnect", {}, timeout=30)
            except (AssertionError, OSError, queue.Empty):
                pass
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        # The reader ends at the adapter's end of output; then its pipe is closed (no unclosed-file warning).
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        if not self._reader.is_alive():
            self.process.stdout.close()
        if not self.process.stdin.closed:
            self.process.stdin.close()


def launch_reply(arguments: dict, opens: bool) -> dict:
    """The reply of a fresh ``iree-lens dap`` to ``initialize`` then ``launch`` with ``arguments`` (``opens``:
    whether it must succeed, as the reply's schema differs); the adapter is closed after."""
    client = DapClient([*lens_command(), "dap"])
    try:
        client.request("initialize", {"adapterID": "iree-lens"})
        return client.request("launch", arguments, ok=opens)
    finally:
        client.close()
