"""A session over a byte stream: ``iree-lens serve --stdio`` on one end, ``StreamSession`` on the other.

The stream carries frames (``engine.session.wire``). The client opens with a hello naming the session
handler to run (``DebugSession``, ``TimeTravelSession``, ``ReferenceSession``: a ``module:Class`` inside
``engine``) and whether it wants ``Progress`` events; the server answers with its own hello, then reads
commands and sends events until the stream ends or a ``Shutdown`` arrives. A pause request is a control
message read while a command runs, as ``ChildSession`` reads one.

``StreamSession(argv, handler, on_event)`` starts ``argv`` (``iree-lens serve --stdio``, or
``ssh HOST iree-lens serve --stdio``: SSH gives authentication and encryption, and nothing listens on a
port) and is a ``SessionClient`` transport (``engine.session.client.Transport``; ``remote(command,
handler)`` is its factory, as ``client.in_process`` and ``client.child_process`` are theirs): ``send``,
``pause``, ``stop``, ``restart`` (a fresh server), ``close``, ``alive``, events to a callback on a reader
thread. A stream that ends before ``close()`` is reported once as ``Crashed`` with how the server ended
(a signal, an exit status) and its last lines on stderr.

The server also answers the module queries of ``engine.session.module_queries`` (disassembly, a module
file's bytes) from its own files: a client on another machine has none.
"""

from __future__ import annotations

import collections
import importlib
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

from engine.errors import LensError
from engine.session import module_queries
from engine.session.protocol import (
    Command,
    Crashed,
    Event,
    Failed,
    Finished,
    Location,
    Open,
    Progress,
    Shutdown,
    Stopped,
)
from engine.session.wire import (
    Compression,
    ConnectionLost,
    FrameMemo,
    WireError,
    read_frame,
    small_frame,
    write_frame,
)

PROTOCOL_VERSION = 2  # 2: dataclass fields at their defaults are left out
# Handlers the client names by a short word (any ``engine`` class of the handler shape is accepted too).
HANDLERS = {
    "debug": "engine.session.debug_session:DebugSession",
    "timetravel": "engine.session.timetravel_session:TimeTravelSession",
    "reference": "engine.session.reference_session:ReferenceSession",
}
_PIPE_SIZE = 1 << 20  # a bigger pipe buffer: fewer wake-ups when a tensor streams through
_LISTEN_AFTER = 0.05  # s: a command running longer has the other thread read (for a pause) meanwhile


# ----------------------------------------------------------------------------------------------- server


def handler_class(name: str) -> type:
    path = HANDLERS.get(name, name)
    module_name, _, class_name = path.partition(":")
    if not module_name.startswith("engine.") or not class_name:
        raise WireError(f"unknown session handler {name!r} (one of {', '.join(HANDLERS)}, or engine.MODULE:CLASS)")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        raise WireError(f"no session handler {path!r} in this IREE Lens") from None


def serve(reader: BinaryIO, writer: BinaryIO, *, compress: bool = True) -> int:
    """Serve one client on a pair of byte streams until it shuts down or the stream ends; the exit status."""
    send_lock = threading.Lock()
    compression = Compression(compress)  # learns the link's speed from the tensors it sends
    closed = threading.Event()

    def send(message: Any) -> None:
        with send_lock:
            if closed.is_set():
                return
            try:
                write_frame(writer, message, compression=compression)
            except (BrokenPipeError, ConnectionError, ValueError):
                closed.set()  # the client went away: the command loop ends on its next read
            except WireError as e:  # a value that cannot travel: say so instead of dropping the event
                write_frame(writer, {"k": "event", "event": Failed(f"cannot send the answer: {e}")})

    try:
        hello = read_frame(reader)
    except ConnectionLost:
        return 0
    except WireError as e:  # not a client at all (a person typing, another program): no frame would reach it
        print(f"iree-lens serve: {e}; a client starts this command (--remote=...)", file=sys.stderr)
        return 2
    if not (isinstance(hello, dict) and hello.get("k") == "hello"):
        send({"k": "error", "message": "the session stream must open with a hello"})
        return 2
    if hello.get("version") != PROTOCOL_VERSION:
        send({"k": "error", "message": f"protocol version {hello.get('version')} asked, {PROTOCOL_VERSION} spoken"})
        return 2
    try:
        session_class = handler_class(str(hello.get("handler", "debug")))
    except WireError as e:
        send({"k": "error", "message": str(e)})
        return 2
    progress = bool(hello.get("progress"))

    def emit(event: Event) -> None:
        if progress or not isinstance(event, Progress):
            send({"k": "event", "event": event})

    handler = session_class(emit)
    if hasattr(handler, "report_progress"):
        handler.report_progress = progress  # not asked for: no Progress built per dispatch
    if hasattr(handler, "copy_answers"):
        handler.copy_answers = False  # an answer is sent before the next command runs: no copy to keep
    send({"k": "hello", "role": "server", "version": PROTOCOL_VERSION, "host": socket.gethostname(), "pid": os.getpid()})

    return _CommandLoop(reader, handler, send, emit).run()


class _CommandLoop:
    """Reads frames and runs commands, strictly in order, with no thread hop between the two.

    Two threads take turns as the *reader*. The one that reads a command runs it itself, then reads on; a
    command that runs longer than ``_LISTEN_AFTER`` seconds (a run) is noticed by the other thread, which
    then reads meanwhile, for a pause request (served at once) or the next command (which waits for the
    running one: tickets keep commands in order). A quick command (a step, a query) wakes no other thread.
    """

    def __init__(self, reader: BinaryIO, handler: Any, send: Callable[[Any], None], emit: Callable[[Event], None]):
        self.reader = reader
        self.handler = handler
        self.send = send
        self.emit = emit
        self.cv = threading.Condition()
        self.reading = False  # a thread holds the reader's turn
        self.running_since: float | None = None  # when the running command started
        self.issued = 0  # tickets handed to commands read so far
        self.done = 0  # commands finished
        self.waiting = 0  # threads waiting for their ticket
        self.finished = False
        self.status = 0
        self.module_path: str | None = None  # of the last Open (module queries read it)
        self.memo = FrameMemo()  # a step's command is decoded once, not at every step

    def run(self) -> int:
        for k in range(2):
            threading.Thread(target=self._take_turns, name=f"session-commands-{k}", daemon=True).start()
        with self.cv:
            self.cv.wait_for(lambda: self.finished)
        return self.status

    def _may_read(self) -> bool:
        if self.reading:
            return False
        since = self.running_since
        return since is None or time.monotonic() - since >= _LISTEN_AFTER

    def _take_turns(self) -> None:
        while True:
            with self.cv:
                while not self.finished and not self._may_read():
                    self.cv.wait(_LISTEN_AFTER)  # timed: a long command is noticed without a notify
                if self.finished:
                    return
                self.reading = True
            message = self._read()
            kind = message.get("k") if isinstance(message, dict) else None
            with self.cv:
                self.reading = False
                ticket = None if kind == "pause" else self.issued
                if ticket is not None:
                    self.issued += 1
            if ticket is None:
                self.handler.pause()
                continue
            with self.cv:
                self.waiting += 1
                self.cv.wait_for(lambda t=ticket: self.done == t or self.finished)
                self.waiting -= 1
                if self.finished:
                    return
                self.running_since = time.monotonic()
            self._run(message.get("command") if kind == "command" else None)
            with self.cv:
                self.done = ticket + 1
                self.running_since = None
                if self.waiting:  # a command read meanwhile waits for this one
                    self.cv.notify_all()

    def _run(self, command: Any) -> None:
        if isinstance(command, Shutdown):
            close = getattr(self.handler, "close", None)
            if callable(close):  # a run parked at a dispatch waits for a command: abandon it
                close()
            with self.cv:
                self.finished = True
                self.cv.notify_all()
        elif not isinstance(command, Command):
            self.send({"k": "error", "message": f"not a command: {type(command).__name__}"})
        elif isinstance(command, module_queries.QUERIES):  # the module file is here: the server answers
            try:
                self.emit(module_queries.answer(command, self.module_path))
            except (LensError, OSError) as e:
                self.emit(Failed(str(e)))
        else:
            if isinstance(command, Open):
                self.module_path = command.module_path
            try:
                self.handler.handle(command)
            except Exception as e:  # a bug in a handler is reported, not fatal to the session
                self.emit(Failed(f"{type(e).__name__}: {e}"))

    def _read(self) -> Any:
        try:
            return read_frame(self.reader, self.memo)
        except ConnectionLost:
            return {"k": "command", "command": Shutdown()}
        except WireError as e:
            self.send({"k": "error", "message": str(e)})
            self.status = 2
            return {"k": "command", "command": Shutdown()}


def serve_stdio() -> int:
    """``iree-lens serve --stdio``: serve one client on this process's stdin/stdout."""
    frames_in, frames_out = claim_stdio()
    return serve(frames_in, frames_out)


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """This process's real stdin/stdout as binary streams for a protocol; anything else that would print
    to stdout (a library, a stray print) goes to stderr from now on, so the stream stays clean."""
    frames_in = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    frames_out = os.fdopen(os.dup(1), "wb", buffering=1 << 16)
    _grow_pipe(frames_in.fileno())
    _grow_pipe(frames_out.fileno())
    sys.stdout.flush()
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return frames_in, frames_out


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, 1031, _PIPE_SIZE)  # F_SETPIPE_SZ (Linux); other kinds of fd refuse, harmlessly
    except (OSError, ImportError, ValueError):
        pass


# ----------------------------------------------------------------------------------------------- client


class RemoteError(WireError):
    """The server refused the session (another protocol version, an unknown handler) or could not start."""


class StreamSession:
    """A transport (``engine.session.client.Transport``) to a session server on a byte stream."""

    crash_isolated = True  # the session runs in the server's process: a faulting kernel kills only that

    def __init__(
        self,
        argv: Sequence[str],
        handler: str,
        on_event: Callable[[Event], Any],
        *,
        progress: bool = False,
        compress: bool = True,
        stderr: BinaryIO | None = None,
        connect_timeout: float = 60.0,
        pull: bool = False,
    ):
        """``pull``: no reader thread; the caller reads events itself with ``pump`` (a blocking client:
        the reply to a step is read on the thread that waits for it, one thread wake-up less a step)."""
        self.argv = list(argv)
        self.pull = pull
        self._read_lock = threading.Lock()  # pull: the one thread reading frames now
        self.handler = handler
        self.on_event = on_event
        self.progress = progress
        self.compression = Compression(compress)
        self.connect_timeout = connect_timeout
        self._stderr_sink = stderr if stderr is not None else getattr(sys.stderr, "buffer", None)
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=8)
        self._send_lock = threading.Lock()
        self._memo = _CommandFrames()
        self._last_location = Location()
        self._stopped = threading.Event()
        self.process: subprocess.Popen | None = None
        self._start()

    def _start(self) -> None:
        self._closing = False
        self._reported = False
        self._ended = False  # the stream reached its end (pull: nothing more to read)
        try:
            process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
            )
        except OSError as e:
            raise RemoteError(f"cannot start the session server {self.argv[0]!r}: {e}") from None
        self.process = process
        for fd in (process.stdin.fileno(), process.stdout.fileno()):
            _grow_pipe(fd)
        self._in = _FrameReader(process.stdout)
        self._out = process.stdin
        self._reader: threading.Thread | None = None  # started by the first write, unless pulling
        threading.Thread(target=self._pump_stderr, args=(process,), name="session-stderr", daemon=True).start()
        # A server that never answers (ssh waiting for a password, a wrong command) is killed, not waited for.
        watchdog = threading.Timer(self.connect_timeout, process.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            hello = {"k": "hello", "version": PROTOCOL_VERSION, "handler": self.handler, "progress": self.progress}
            try:
                write_frame(self._out, hello)
            except OSError:
                pass  # the server is gone already: reading its answer says how
            hello = read_frame(self._in)
        except WireError as e:
            watchdog.cancel()
            process.kill()
            process.wait(timeout=10)
            self._ended = True  # nothing will be read from it: no reader thread starts on its closed pipes
            _close_quietly(process.stdin, process.stdout)
            raise RemoteError(self._ended_text(e)) from None
        finally:
            watchdog.cancel()
        if not isinstance(hello, dict) or hello.get("k") != "hello" or hello.get("role") != "server":
            message = hello.get("message") if isinstance(hello, dict) else None
            self.close()
            if message:
                raise RemoteError(f"the session server refused: {message}")
            # Something answered, but not as a server does (``cat`` echoes the hello back).
            raise RemoteError(f"{shlex.join(self.argv)!r} did not answer as an iree-lens session server "
                              "(iree-lens serve --stdio)")  # fmt: skip
        self.server = hello

    def read_on_caller(self) -> None:
        """Deliver events only from ``pump`` (no reader thread); before the first command."""
        if self._reader is None:
            self.pull = True

    def pump(self, timeout: float | None = None, until: Callable[[], bool] | None = None) -> bool:
        """(``pull``) Read frames on this thread, delivering their events to ``on_event``, until one event
        was delivered (or ``until()`` holds); False when ``timeout`` s passed first or the stream has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._read_lock.acquire(timeout=-1 if deadline is None else max(timeout, 0.0)):
            return False
        try:
            process, stream = self.process, self._in
            while until is None or not until():
                if self._ended:
                    return False
                if not stream.pending:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and (left <= 0 or not select.select([stream], [], [], left)[0]):
                        return False
                reported = self._reported
                delivered = self._read_one(process, stream)
                if delivered is None:  # the end: a Crashed was delivered, or nothing more will be
                    return until is None and self._reported and not reported
                if delivered and until is None:
                    return True
            return True
        finally:
            self._read_lock.release()

    # -- the surface of engine.session.client.Transport

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and not self._reported

    def send(self, command: Command) -> None:
        frame = self._memo.frame(command)  # (the same Step again and again: encoded once)
        if frame is None:
            self._write({"k": "command", "command": command})
        else:
            self._write(frame)

    def pause(self) -> None:
        self._write({"k": "pause"})

    def stop(self, timeout: float = 1.0) -> bool:
        """Pause; if no stop comes within ``timeout`` s, end the server (reported as ``Crashed``)."""
        if not self.alive:
            return False
        self._stopped.clear()
        self.pause()
        if self._wait_stopped(timeout):
            return True
        self.process.kill()  # the reader thread reports the end
        return False

    def restart(self) -> None:
        """A fresh server after the connection dropped (the client opens the module again); a server that
        cannot be started again is said as a ``Failed`` event, and the transport stays dead."""
        self.close()
        try:
            self._start()
        except RemoteError as e:
            self._reported = True
            self.on_event(Failed(f"cannot restart the session server: {e}"))

    def close(self) -> None:
        process = self.process
        if process is None:
            return
        self._closing = True
        try:
            self._write({"k": "command", "command": Shutdown()})
            self._out.close()
        except (OSError, ValueError):
            pass
        if self.pull and self._reader is None:
            self._drain(10.0)  # a server blocked on a full pipe (events nobody read) reads its Shutdown
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if self._reader is None and self._read_lock.acquire(timeout=1.0):
            # (pull, or never read) No reader thread closes the server's output: closed here, once no one reads.
            try:
                self._ended = True  # a later pump reads nothing
                _close_quietly(process.stdout)
            finally:
                self._read_lock.release()

    # -- streams

    def _drain(self, timeout: float) -> None:
        """(``pull``, closing) Read and drop what the server still sends, until it ends or ``timeout`` s."""
        if not self._read_lock.acquire(timeout=1.0):
            return  # a thread in pump reads (and drops: the client is closing) meanwhile
        try:
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0 and select.select([self._in], [], [], left)[0]:
                if not self._in.raw.read(1 << 20):
                    return
        except (OSError, ValueError):
            pass
        finally:
            self._read_lock.release()

    def _wait_stopped(self, timeout: float) -> bool:
        if not self.pull:
            return self._stopped.wait(timeout)
        deadline = time.monotonic() + timeout
        while not self._stopped.is_set() and (left := deadline - time.monotonic()) > 0:
            # Read the stop ourselves while no other thread reads (a caller waiting in pump reads it).
            if not self.pump(min(left, 0.05), until=self._stopped.is_set):
                self._stopped.wait(min(left, 0.01))
        return self._stopped.is_set()

    def _write(self, message: Any) -> None:
        with self._send_lock:
            if self._reader is None and not self.pull and not self._ended:
                self._reader = threading.Thread(
                    target=self._read_events, args=(self.process, self._in), name="session-stream", daemon=True
                )
                self._reader.start()
            try:
                if isinstance(message, bytes):  # a whole frame
                    self._out.write(message)
                else:
                    write_frame(self._out, message, compression=self.compression)
            except (BrokenPipeError, ConnectionError, ValueError, OSError):
                if not self._closing:
                    self._lost(ConnectionLost("the session stream is closed"))

    def _read_events(self, process: subprocess.Popen, stream: _FrameReader) -> None:
        while self._read_one(process, stream) is not None:
            pass
        _close_quietly(stream.raw)  # the stream's end: nothing more will be read from this server

    def _read_one(self, process: subprocess.Popen, stream: _FrameReader) -> bool | None:
        """Read one frame and deliver its event: True when an event was delivered, None at the stream's end
        (a dropped connection is reported, once, as ``Crashed``)."""
        try:
            message = read_frame(stream)
        except WireError as e:
            if process is self.process:
                self._ended = True
                if not (self._closing and isinstance(e, ConnectionLost)):
                    self._lost(e)
            return None
        if not isinstance(message, dict):
            return False
        if message.get("k") == "error":
            self.on_event(Failed(f"session server: {message.get('message')}"))
            return True
        event = message.get("event")
        if isinstance(event, Progress | Stopped):
            self._last_location = event.location
        if isinstance(event, Stopped | Finished | Failed):  # the run is not running any more
            self._stopped.set()
        if isinstance(event, Event):
            self.on_event(event)
            return True
        return False

    def _lost(self, error: Exception) -> None:
        """Report a dropped connection once, as a ``Crashed`` event with what the server said last."""
        if self._reported:
            return
        self._reported = True
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.on_event(Crashed(self._ended_text(error), self._last_location, self.process.returncode))

    def _ended_text(self, error: Exception) -> str:
        from engine.session.child import describe_exit

        code = self.process.poll()
        status = "the server still runs" if code is None else describe_exit(code).replace("session process", "server")
        tail = " | ".join(line for line in self._stderr_tail if line)
        text = f"the connection to the session server was lost ({error}; {' '.join(self.argv[:3])}...: {status})"
        return text + (f": {tail}" if tail else "")

    def _pump_stderr(self, process: subprocess.Popen) -> None:
        for line in iter(process.stderr.readline, b""):
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip())
            if self._stderr_sink is not None:
                try:
                    self._stderr_sink.write(line)
                    self._stderr_sink.flush()
                except (OSError, ValueError):
                    pass
        _close_quietly(process.stderr)  # its end: the server and whatever it started have exited


def _close_quietly(*pipes) -> None:
    """Close a child's pipes (an unclosed one is a ResourceWarning when it is collected)."""
    for pipe in pipes:
        if pipe is None:
            continue
        try:
            pipe.close()
        except (OSError, ValueError):
            pass


class _CommandFrames(FrameMemo):
    """Frames of commands by the command (``{"k": "command", "command": ...}``), each encoded once."""

    def frame(self, command: Any) -> bytes | None:
        try:
            frame = self.frames.get(command)
        except TypeError:  # unhashable: encoded each time
            return None
        if frame is None:
            frame = small_frame({"k": "command", "command": command})
            if frame is not None and len(frame) <= self.largest:
                self._keep(self.frames, command, frame)
        return frame


class _FrameReader:
    """A buffered reader of a pipe that says whether it holds unread bytes (``pending``: no need to wait
    for the pipe) and reads big blocks (a tensor) straight into their destination."""

    def __init__(self, raw: BinaryIO, size: int = 1 << 16):
        self.raw = raw
        self.size = size
        self.buffer = b""
        self.at = 0

    @property
    def pending(self) -> bool:
        return self.at < len(self.buffer)

    def fileno(self) -> int:
        return self.raw.fileno()

    def read(self, n: int) -> bytes:
        if self.at + n <= len(self.buffer):  # the common case: a frame's parts are buffered already
            data = self.buffer[self.at : self.at + n]
            self.at += n
            return data
        parts = [self.buffer[self.at :]]
        got = len(parts[0])
        self.buffer, self.at = b"", 0
        while got < n:
            chunk = self.raw.read(max(n - got, self.size))
            if not chunk:
                break
            if got + len(chunk) > n:  # keep what belongs to the next frame
                self.buffer, self.at = chunk, n - got
                chunk = chunk[: n - got]
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def readinto(self, view: memoryview) -> int:
        if self.pending:
            n = min(len(view), len(self.buffer) - self.at)
            view[:n] = self.buffer[self.at : self.at + n]
            self.at += n
            return n
        return self.raw.readinto(view) or 0


def add_remote_argument(parser) -> None:
    """``--remote=COMMAND``, the same on every client sub-command."""
    parser.add_argument(
        "--remote",
        metavar="COMMAND",
        help="run the session in the server that COMMAND starts, e.g. 'ssh HOST iree-lens serve --stdio' "
        "(paths are the server's)",
    )


def open_remote(command: str, handler: str, on_event: Callable[[Event], Any], **options: Any) -> StreamSession:
    """A ``StreamSession`` on the server that the shell-style command line ``command`` starts."""
    argv = shlex.split(command)
    if not argv:
        raise RemoteError("--remote needs a command line that starts 'iree-lens serve --stdio'")
    return StreamSession(argv, handler, on_event, **options)


def remote(command: str, handler: str) -> Callable[[Callable[[Event], Any]], StreamSession]:
    """A ``SessionClient`` transport factory (like ``client.in_process``) for the server ``command`` starts;
    ``handler`` names the session it runs (``debug``, ``timetravel``, ``reference``)."""
    # Progress (one small frame a dispatch) lets a crash report say which dispatch was running.
    return lambda on_event: open_remote(command, handler, on_event, progress=True)
