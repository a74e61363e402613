"""The session over a byte stream: the wire encoding, ``iree-lens serve --stdio``, and ``--remote``.

``iree-lens debug --remote='<iree-lens> serve --stdio'`` must print the same stop records and save the same
tensors as the same commands run locally: both run as a user runs them (separate processes), on a program
compiled here with the real iree-compile; the same again through a real ``ssh`` to a local ``sshd`` (skipped
with the reason when sshd cannot start).
"""

from __future__ import annotations

import io
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from support import LocalSshd, cpu_seconds, lens_argv, lens_env, wait_until
from support.session import Events, compile_program

from engine.errors import LensError
from engine.session.protocol import (
    Bindings,
    Breakpoint,
    BreakpointKind,
    Call,
    Crashed,
    DispatchInfo,
    Failed,
    Finished,
    Location,
    Open,
    Opened,
    Progress,
    ReadBindings,
    RegisterFile,
    SetBreakpoints,
    Step,
    StopDetail,
    Stopped,
    TensorRef,
)
from engine.session.stream import RemoteError, StreamSession
from engine.session.wire import Compression, ConnectionLost, WireError, encode, read_frame, write_frame

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ["--input=4x8xf32=3", "--input=4x8xf32=1"]


def serve_command() -> str:
    return shlex.join([*lens_argv(), "serve", "--stdio"])


def roundtrip(value, **options):
    stream = io.BytesIO()
    write_frame(stream, value, **options)
    stream.seek(0)
    return read_frame(stream)


# ------------------------------------------------------------------------------------------ the wire


def test_protocol_values_roundtrip_exactly():
    info = DispatchInfo(1, "exe", "main_dispatch_1", (4, 1, 1), (7, 8), (), "after", "local-sync")
    event = Stopped("dispatch", Location(dispatch="main_dispatch_1", dispatch_index=1, dispatch_info=info),
                    StopDetail(RegisterFile((1, 2**32 - 1), ("!hal.buffer",)), nan_bindings=(1,)))
    back = roundtrip(event)
    assert type(back) is Stopped and back == event
    assert type(back.detail.registers.i32) is tuple
    other = {"nan": float("nan"), "pcs": {3: "x", (1, 2): None}, "flags": (True, None), "list": [1, "a"]}
    back = roundtrip(other)
    assert back["pcs"] == {3: "x", (1, 2): None} and back["flags"] == (True, None) and back["list"] == [1, "a"]
    assert np.isnan(back["nan"])
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array(5, np.int64), np.zeros((0, 3), np.uint8),
              np.arange(6, dtype=np.float16)[::2], np.ones(4, ml_dtypes.bfloat16), np.array([1 + 2j])]
    for array in arrays:
        got = roundtrip(TensorRef(array.shape, array.dtype.str, "", array=array)).array
        assert got.dtype == array.dtype and got.shape == array.shape
        assert got.tobytes() == np.ascontiguousarray(array).tobytes()
    assert roundtrip(b"\x00\xff" * 3) == b"\x00\xff" * 3


def frame_size(value, compression) -> int:
    stream = io.BytesIO()
    write_frame(stream, value, compression=compression)
    return stream.tell()


def test_tensors_compress_only_when_it_pays():
    """zlib only where sending raw would take longer: a slow link and data that compresses."""
    zeros = np.zeros(16 << 20, np.uint8)
    noise = np.random.default_rng(0).integers(0, 256, 16 << 20, dtype=np.uint8)
    slow, fast = Compression(link=10e6), Compression(link=50e9)  # 10 MB/s (a network), 50 GB/s
    assert frame_size(zeros, slow) < zeros.nbytes // 50  # zlib chunks
    assert zeros.nbytes <= frame_size(zeros, fast) < zeros.nbytes + 4096  # raw: compressing costs more
    assert noise.nbytes <= frame_size(noise, slow) < noise.nbytes + 4096  # raw: it does not compress
    assert zeros.nbytes <= frame_size(zeros, Compression(False)) < zeros.nbytes + 4096
    for compression in (slow, fast):
        stream = io.BytesIO()
        write_frame(stream, [zeros, noise, zeros[:1000]], compression=compression)
        stream.seek(0)
        back = read_frame(stream)
        assert all(np.array_equal(a, b) for a, b in zip(back, [zeros, noise, zeros[:1000]]))


def test_tensors_are_not_sampled_where_compression_cannot_pay(monkeypatch):
    """No zlib work while the link is unknown (the chunks measure it), nor on a link faster than zlib has been
    here (a local pipe): only the first tensor on a known link is sampled."""
    import zlib

    from engine.session import wire

    calls = []
    compress = zlib.compress
    monkeypatch.setattr(wire.zlib, "compress", lambda data, level=-1: calls.append(len(data)) or compress(data, level))
    zeros = np.zeros(2 << 20, np.uint8)
    unknown = Compression()
    frame_size(zeros, unknown)
    assert not calls and unknown.fastest_zlib is None
    fast = Compression(link=50e9)
    frame_size(zeros, fast)
    assert len(calls) == 1 and fast.fastest_zlib is not None  # one sample: zlib is slower than this link
    frame_size(zeros, fast)
    assert len(calls) == 1


def test_the_link_is_measured_on_raw_chunks():
    """Unknown at first (the first chunks go raw), then what the writes took: a reader that drains slowly
    makes the following chunks compressed."""

    class SlowReader(io.BytesIO):
        def write(self, data):
            # A 5 MB/s link: compressing zeros pays there even when this machine's zlib is slowed by load
            # (at 20 MB/s, zlib under 50 MB/s on a busy CI machine made every chunk go raw).
            time.sleep(len(data) / 5e6)
            return super().write(data)

    compression = Compression()
    stream = SlowReader()
    zeros = np.zeros(16 << 20, np.uint8)
    write_frame(stream, zeros, compression=compression)
    assert compression.link is not None and compression.link < 10e6
    assert stream.tell() < zeros.nbytes  # the chunks after the first went compressed
    stream.seek(0)
    assert np.array_equal(read_frame(stream), zeros)


def test_foreign_types_and_broken_frames_are_refused():
    head, _, body = encode(ReadBindings())
    frame = head + body
    for name in (b"subprocess:Popen", b"np", b"Path", b"engine.session.wire:_Encoder"):  # only engine types
        hostile = frame.replace(b'"$d":"ReadBindings"', b'"$d":"' + name + b'"')
        assert hostile != frame
        with pytest.raises(WireError):
            read_frame(io.BytesIO(hostile))

    def with_body(text: bytes) -> io.BytesIO:
        return io.BytesIO(struct.pack("<4sII", b"ILW1", 0, len(text)) + text)

    assert read_frame(with_body(b'{"$d":"Open","module_path":"m.vmfb"}')) == Open("m.vmfb")
    for text in (b'{"$d":"Open"}', b'{"$d":"Open","module_path":"m","shell":"rm -rf"}'):  # missing / unknown
        with pytest.raises(WireError):
            read_frame(with_body(text))
    with pytest.raises(ConnectionLost):
        read_frame(io.BytesIO(frame[:-3]))
    with pytest.raises(ConnectionLost):
        read_frame(io.BytesIO(b""))
    with pytest.raises(WireError, match="does not carry"):
        read_frame(io.BytesIO(b"Welcome to the machine\n" + frame))
    with pytest.raises(WireError):
        encode([object()])


# --------------------------------------------------------------------------------- the stream session


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    return {
        "plain": compile_program("nan_log", "llvm-cpu", root),
        "traced": compile_program("nan_log", "llvm-cpu", root, "--iree-flow-trace-dispatch-tensors"),
    }


def test_stream_session_runs_and_reports_a_dropped_connection(modules):
    events = Events()
    session = StreamSession([*lens_argv(), "serve", "--stdio"], "debug", events, stderr=io.BytesIO())
    try:
        session.send(Open(str(modules["plain"])))
        assert isinstance(events.next(), Opened)
        session.send(SetBreakpoints((Breakpoint(BreakpointKind.DISPATCH, ordinal=2),)))
        session.send(Call("main", ("4x8xf32=3", "4x8xf32=1")))
        stop = events.next()
        assert isinstance(stop, Stopped) and stop.location.dispatch_info.ordinal == 2
        session.send(ReadBindings())
        answer = events.next()
        assert isinstance(answer, Bindings) and len(answer.tensors) == len(stop.location.dispatch_info.bindings)
        expected = np.full((4, 8), np.log(2.0), np.float32)  # dispatch 2 reads log(3 - 1)
        assert any(np.array_equal(ref.to_numpy().view(np.float32), expected.ravel()) for ref in answer.tensors)
        session.process.kill()  # the connection drops (as when ssh dies)
        crashed = events.next()
        assert isinstance(crashed, Crashed) and "lost" in crashed.reason and crashed.exitcode == -9
        assert crashed.location.dispatch_info.ordinal == 2  # where the session was
        assert not session.alive
    finally:
        session.close()


def test_a_server_that_is_not_one_is_a_clear_error():
    with pytest.raises(RemoteError, match="lost"):
        StreamSession(["false"], "debug", lambda e: None, stderr=io.BytesIO())
    with pytest.raises(RemoteError) as echoed:
        StreamSession(["cat"], "debug", lambda e: None, stderr=io.BytesIO())  # echoes our own hello
    assert str(echoed.value) == "'cat' did not answer as an iree-lens session server (iree-lens serve --stdio)"
    with pytest.raises(RemoteError, match="handler"):
        StreamSession([*lens_argv(), "serve", "--stdio"], "os:system", lambda e: None, stderr=io.BytesIO())
    with pytest.raises(LensError):
        StreamSession(["/nonexistent/iree-lens"], "debug", lambda e: None)


def test_a_server_fed_what_is_not_a_client_says_so_in_one_line():
    done = subprocess.run([*lens_argv(), "serve", "--stdio"], input=b"hello garbage\n", capture_output=True,
                          env=lens_env(), timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.decode().strip().splitlines() == [
        "iree-lens serve: the stream does not carry session messages (it begins 'hello garbag'); "
        "a client starts this command (--remote=...)"
    ]


def test_finished_outputs_cross_the_stream(modules):
    events = Events()
    session = StreamSession([*lens_argv(), "serve", "--stdio"], "debug", events, stderr=io.BytesIO())
    try:
        session.send(Open(str(modules["plain"])))
        events.next()
        session.send(Call("main", ("4x8xf32=3", "4x8xf32=1")))
        finished = events.next()
        assert isinstance(finished, Finished)
        assert np.allclose(finished.outputs[0].to_numpy(), np.log(2.0) ** 2)
    finally:
        session.close()
    assert session.process.returncode == 0


# ------------------------------------------------------------------------------ iree-lens debug --remote

SCRIPT = """break dispatch 1
break dispatch *dispatch_2* after
continue
save-tensors {out}/a
info registers
step 3
next
continue
save-tensors {out}/b
reverse-step 2
reverse-continue
continue
continue
save-tensors {out}/c
"""
REFERENCE_SCRIPT = "break dispatch *\ncontinue\nsave-tensors {out}/a\ncontinue\ncontinue\ncontinue\nsave-tensors {out}/b\n"


def run_debug(module: Path, script: str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out.mkdir(parents=True)
    commands = out / "commands.gdb"
    commands.write_text(script.format(out=out))
    proc = subprocess.run(
        [*lens_argv(), "debug", str(module), "--function=main", *HEALTHY, f"--commands={commands}", "--json", *extra],
        capture_output=True, text=True, env=lens_env(), timeout=300, cwd=out,
    )
    saved = {p.relative_to(out).as_posix(): np.load(p) for p in sorted(out.rglob("*.npy"))}
    return proc, saved


def assert_same_run(local, remote, out_local: Path, out_remote: Path) -> None:
    (proc_l, saved_l), (proc_r, saved_r) = local, remote
    assert proc_l.returncode == proc_r.returncode == 0, (proc_l.stderr, proc_r.stderr)
    assert proc_r.stdout.replace(str(out_remote), "OUT") == proc_l.stdout.replace(str(out_local), "OUT")
    assert saved_l.keys() == saved_r.keys() and len(saved_l) >= 3
    for name, array in saved_l.items():
        assert saved_r[name].dtype == array.dtype and saved_r[name].tobytes() == array.tobytes(), name


def test_a_connection_lost_while_saving_tensors_is_said_in_words(modules, tmp_path):
    proxy = [sys.executable, str(ROOT / "tests" / "support" / "cutting_proxy.py"), '"ReadTensors"']
    remote = shlex.join([*proxy, *lens_argv(), "serve", "--stdio"])
    proc, saved = run_debug(modules["plain"], "break dispatch 1\ncontinue\nsave-tensors {out}/a\ncontinue\n",
                            tmp_path / "out", f"--remote={remote}")  # fmt: skip
    assert proc.returncode == 1 and not saved
    errors = [line for line in proc.stderr.splitlines() if "commands.gdb:" in line]
    where = f"iree-lens debug: {tmp_path / 'out' / 'commands.gdb'}:3: "
    assert errors[0].startswith(f"{where}the connection to the session server was lost ("), proc.stderr
    assert errors[1:] == [f"{where}the commands file stops at this error (1 later commands not run)"]
    assert "Crashed(" not in proc.stderr and "Location(" not in proc.stderr


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_debug_remote_prints_and_saves_what_a_local_run_does(modules, tmp_path, engine):
    module = modules["plain" if engine == "debug" else "traced"]
    script = SCRIPT if engine == "debug" else REFERENCE_SCRIPT
    local = run_debug(module, script, tmp_path / "local", f"--engine={engine}")
    remote = run_debug(module, script, tmp_path / "remote", f"--engine={engine}", f"--remote={serve_command()}")
    assert local[0].stdout.count('"reason"') >= 4
    assert_same_run(local, remote, tmp_path / "local", tmp_path / "remote")


def test_debug_remote_that_drops_is_an_error(modules, tmp_path):
    # A "server" that dies after the first command it reads: the client says so and exits 1.
    dying = shlex.join([sys.executable, "-c", "import sys; sys.stdin.buffer.read(64); sys.exit(3)"])
    proc, _ = run_debug(modules["plain"], "continue\n", tmp_path / "x", f"--remote={dying}")
    assert proc.returncode == 1 and "lost" in proc.stderr and proc.stdout == ""


# ------------------------------------------------------------------------------------------ over ssh


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LocalSshd(tmp_path_factory.mktemp("sshd"))
    reason = server.start()
    if reason is not None:
        server.stop()
        pytest.skip(reason)
    yield server
    server.stop()


def test_debug_over_ssh(modules, tmp_path, sshd):
    remote_serve = shlex.join(["env", f"PYTHONPATH={ROOT}", f"TMPDIR={tempfile.gettempdir()}", *lens_argv(), "serve", "--stdio"])
    remote = shlex.join([*sshd.ssh_argv(), remote_serve])
    local = run_debug(modules["plain"], SCRIPT, tmp_path / "local")
    over_ssh = run_debug(modules["plain"], SCRIPT, tmp_path / "ssh", f"--remote={remote}")
    assert_same_run(local, over_ssh, tmp_path / "local", tmp_path / "ssh")


def test_ssh_connection_killed_mid_session_is_reported(modules, sshd):
    remote_serve = shlex.join(["env", f"PYTHONPATH={ROOT}", f"TMPDIR={tempfile.gettempdir()}", *lens_argv(), "serve", "--stdio"])
    events = Events()
    session = StreamSession([*sshd.ssh_argv(), remote_serve], "debug", events, stderr=io.BytesIO())
    try:
        session.send(Open(str(modules["plain"])))
        assert isinstance(events.next(), Opened)
        threading.Timer(0.1, session.process.kill).start()  # the ssh client dies
        crashed = events.next(timeout=30)
        assert isinstance(crashed, Crashed) and "lost" in crashed.reason
    finally:
        session.close()


@contextmanager
def spinning_server(tmp_path: Path, cpu_s: float) -> Iterator[tuple[StreamSession, Events]]:
    """A stream session whose server runs spin's long loop (seen using ``cpu_s`` of CPU); closed after."""
    spin = compile_program("spin", "llvm-cpu", tmp_path)
    events = Events()
    session = StreamSession([*lens_argv(), "serve", "--stdio"], "debug", events, stderr=io.BytesIO())
    try:
        session.send(Open(str(spin)))
        assert isinstance(events.next(), Opened)
        idle = cpu_seconds(session.process.pid)
        session.send(Call("spin", ("1000000000",)))
        wait_until(lambda: cpu_seconds(session.process.pid) - idle >= cpu_s, 120, "the server to run the loop")
        yield session, events
    finally:
        session.close()


def test_pause_crosses_the_stream_while_a_run_runs(tmp_path):
    with spinning_server(tmp_path, 0.5) as (session, events):
        session.pause()
        stop = events.next(timeout=30)
        assert isinstance(stop, Stopped) and stop.reason == "paused" and stop.location.frames[-1].function == "spin"
        session.send(ReadBindings())  # served after the pause (no dispatch: a clear failure, in order)
        assert not isinstance(events.next(), Stopped)
    assert session.process.returncode == 0


def test_every_named_handler_exists():
    """The short handler names a client asks a server for (debug, timetravel, reference) name real classes."""
    from engine.session.stream import HANDLERS, handler_class

    for name in HANDLERS:
        assert callable(getattr(handler_class(name), "handle", None)), name


def test_the_server_disassembles_the_module_on_its_side(modules):
    from support import iree_tool

    from engine.session.module_queries import Disassembly, ReadDisassembly

    events = Events()
    session = StreamSession([*lens_argv(), "serve", "--stdio"], "debug", events, stderr=io.BytesIO())
    try:
        session.send(ReadDisassembly("main"))  # before any module: a clear failure
        assert "no module" in events.next().message
        session.send(Open(str(modules["plain"])))
        assert isinstance(events.next(), Opened)
        session.send(ReadDisassembly("main"))
        answer = events.next()
        assert isinstance(answer, Disassembly) and len(answer.lines) > 10
    finally:
        session.close()
    dump = subprocess.run([iree_tool("iree-dump-module"), "--output=disassembly", str(modules["plain"])],
                          capture_output=True, text=True, check=True).stdout
    lines = {line.strip() for line in dump.splitlines()}
    assert all(text in lines for _, text in answer.lines)


def test_the_server_sends_a_module_file_from_its_side(modules, tmp_path):
    """ReadModuleFile: a path relative to the server's working directory, answered with the file's bytes and
    its absolute path there; a file that is not a module, or none, is a clear failure."""
    from engine.session.module_queries import ModuleFile, ReadModuleFile

    server_dir = tmp_path / "server"
    server_dir.mkdir()
    (server_dir / "m.vmfb").write_bytes(modules["plain"].read_bytes())
    (server_dir / "notes.txt").write_text("not a module")
    events = Events()
    serve = shlex.join([*lens_argv(), "serve", "--stdio"])
    argv = ["sh", "-c", f"cd {shlex.quote(str(server_dir))} && exec {serve}"]
    session = StreamSession(argv, "debug", events, stderr=io.BytesIO())
    try:
        session.send(ReadModuleFile("m.vmfb"))
        answer = events.next()
        assert isinstance(answer, ModuleFile) and answer.path == str(server_dir / "m.vmfb")
        assert answer.data.tobytes() == modules["plain"].read_bytes()
        for bad in ("notes.txt", "missing.vmfb", "."):
            session.send(ReadModuleFile(bad))
            assert isinstance(events.next(), Failed), bad
        session.send(Open(answer.path))  # the path it answered opens in the session
        assert isinstance(events.next(), Opened)
    finally:
        session.close()


def test_a_faulting_kernel_kills_the_server_and_is_reported(compiled, tmp_path):
    from support import patched_kernel_copy

    from engine.session.stream import remote

    bad = tmp_path / "null_write.vmfb"
    patched_kernel_copy(compiled.path("elementwise", "llvm-cpu"), bad)
    events = Events()
    session = remote(shlex.join([*lens_argv(), "serve", "--stdio"]), "debug")(events)
    try:
        session.send(Open(str(bad)))
        assert isinstance(events.next(), Opened)
        session.send(Call("main", ("4x8xf32=1", "4x8xf32=2")))
        crash = next(e for e in iter(events.next, None) if not isinstance(e, Progress))
        assert isinstance(crash, Crashed), crash
        assert "SIGSEGV" in crash.reason and crash.exitcode == -11
        assert crash.location.dispatch.startswith("main_dispatch_0")  # from the server's Progress
        assert crash.location.frames[-1].function == "main"
        session.restart()  # a fresh server
        session.send(Open(str(bad)))
        assert isinstance(events.next(), Opened)
    finally:
        session.close()


def test_stop_kills_a_server_that_does_not_pause(tmp_path):
    """``stop(timeout)`` (the window's Stop, DAP's pause through the client): a server that does not answer
    (here frozen with SIGSTOP, as a kernel that never returns) is ended and reported."""
    import signal

    with spinning_server(tmp_path, 0.3) as (session, events):
        os.kill(session.process.pid, signal.SIGSTOP)
        assert session.stop(timeout=1.0) is False
        crashed = events.next(timeout=30)
        assert isinstance(crashed, Crashed) and crashed.exitcode == -9 and not session.alive


def test_a_blocking_client_reads_the_stream_on_its_own_thread(tmp_path):
    """A blocking ``SessionClient`` over the stream reads each reply in ``next_event`` (no reader thread to
    wake per reply); a pause still crosses while a run runs, ``stop`` reads the stop itself when nobody is
    reading, and a dropped connection still arrives as ``Crashed``."""
    from engine.session.client import SessionClient
    from engine.session.stream import remote

    def next_of(kind, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not isinstance(event := client.next_event(timeout=max(0.0, deadline - time.monotonic())), kind):
            pass
        return event

    spin = compile_program("spin", "llvm-cpu", tmp_path)
    client = SessionClient(remote(serve_command(), "debug"), blocking=True, track_history=False)
    try:
        transport = client.connect()
        assert transport.pull
        client.open(str(spin))
        next_of(Opened)
        client.call("spin", ("1000000000",))
        stopper = threading.Timer(0.5, transport.stop, kwargs={"timeout": 30.0})
        stopper.start()  # while this thread waits in next_event (it reads the stop)
        stop = next_of(Stopped)
        stopper.join()
        assert stop.reason == "paused" and stop.location.frames[-1].function == "spin"
        idle = cpu_seconds(transport.process.pid)
        client.continue_()
        wait_until(lambda: cpu_seconds(transport.process.pid) - idle >= 0.3, 120, "the server to run again")
        assert transport.stop(timeout=30.0)  # nobody in next_event: stop reads the stop itself
        assert next_of(Stopped).reason == "paused"
        assert transport._reader is None  # (no reader thread was started)
        transport.process.kill()
        crashed = next_of(Crashed)
        assert crashed.exitcode == -9 and crashed.location.frames[-1].function == "spin"
    finally:
        client.shutdown()


def test_small_immutable_frames_are_encoded_and_decoded_once():
    """A step's command is encoded once by the client and decoded once by the server; a message that could
    be changed by its receiver (a list inside) or carries tensors is decoded afresh every time."""
    from engine.session.stream import _CommandFrames
    from engine.session.wire import FrameMemo

    commands = _CommandFrames()
    step = commands.frame(Step(count=3))
    assert step is commands.frame(Step(count=3)) and step != commands.frame(Step())
    assert commands.frame(Call("main", ("1xf32=1",))) is not None and commands.frame({"a": []}) is None
    memo = FrameMemo()
    first, again = read_frame(io.BytesIO(step), memo), read_frame(io.BytesIO(step), memo)
    assert first is again and first["command"] == Step(count=3)
    for message in ({"k": "event", "x": [1, 2]}, {"k": "event", "x": np.arange(3)}):
        buffer = io.BytesIO()
        write_frame(buffer, message)
        frames = [read_frame(io.BytesIO(buffer.getvalue()), memo) for _ in range(2)]
        assert frames[0] is not frames[1]


def test_closing_a_client_that_reads_nothing_ends_the_server_cleanly(modules):
    """A ``pull`` client that left replies unread (more than the pipe holds: the server blocks writing)
    still shuts the server down at ``close`` instead of waiting for it and killing it."""
    from engine.session.module_queries import ReadDisassembly

    session = StreamSession(
        [*lens_argv(), "serve", "--stdio"], "debug", lambda event: None, stderr=io.BytesIO(), pull=True
    )
    session.send(Open(str(modules["plain"])))
    for _ in range(400):  # each answer is the module's whole disassembly
        session.send(ReadDisassembly("main"))
    time.sleep(1.0)
    start = time.monotonic()
    session.close()
    assert session.process.returncode == 0 and time.monotonic() - start < 8
