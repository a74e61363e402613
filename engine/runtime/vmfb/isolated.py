"""Open and parse a file in a child process under a time and memory limit: what a window calls so that
no file, however damaged or hostile, can freeze it or eat the machine's memory.

    call = BoundedCall(read_module_summary, path, limits=CallLimits(seconds=30, memory_bytes=2 << 30))
    ...                      # the caller's thread stays free; call.cancel() ends it at once
    summary = call.result()  # plain data, or BoundedCallError naming what went wrong

The child is started with ``spawn`` (never ``fork``: a GUI process has threads, and a forked copy of
them is unsafe). It limits its own address space (``RLIMIT_AS``) before running the function; the parent
waits at most ``seconds`` of wall-clock time and kills it after that. The function must be importable at
module level and return picklable plain data (a module summary, lines of text), not live objects such as
memory maps. Errors come back as :class:`BoundedCallError` with ``kind``:

* ``"error"``: the function raised (a typed ``FormatError`` of a damaged file, or anything else); the
  message is the original error's text;
* ``"timeout"``, ``"memory"``, ``"crash"`` (the child died), ``"cancelled"``.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import LensError


@dataclass(frozen=True)
class CallLimits:
    seconds: float = 60.0
    memory_bytes: int = 2 << 30  # address space the call may add to what the child holds at its start


class BoundedCallError(LensError):
    def __init__(self, kind: str, message: str, error_type: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.error_type = error_type  # the class name of the child's exception for kind "error"


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(conn, fn: Callable[..., Any], args: tuple, memory_bytes: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + memory_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        conn.send(("ok", fn(*args)))
    except MemoryError:
        conn.send(("memory", "MemoryError", ""))
    except BaseException as e:  # noqa: BLE001 - every outcome goes back to the parent as data
        conn.send(("error", type(e).__name__, str(e)))
    finally:
        conn.close()


class BoundedCall:
    """``fn(*args)`` running in a child process under ``limits``; ``result()`` waits for it."""

    def __init__(self, fn: Callable[..., Any], *args: Any, limits: CallLimits = CallLimits()):
        self.limits = limits
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_child, args=(child, fn, args, limits.memory_bytes), daemon=True)
        self._process.start()
        child.close()
        self._cancelled = False
        self._outcome: tuple | None = None

    def cancel(self) -> None:
        """End the call now (``result()`` then raises a ``cancelled`` BoundedCallError)."""
        self._cancelled = True
        self._kill()

    def done(self) -> bool:
        return self._outcome is not None or self._cancelled or not self._process.is_alive()

    def _kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join()

    def result(self) -> Any:
        """The function's return value; raises BoundedCallError for every other ending."""
        if self._outcome is None:
            self._outcome = self._wait()
        kind, *rest = self._outcome
        if kind == "ok":
            return rest[0]
        raise BoundedCallError(
            kind, rest[1] if kind == "error" else rest[0], rest[0] if kind == "error" else None
        )

    def _wait(self) -> tuple:
        seconds, mib = self.limits.seconds, self.limits.memory_bytes >> 20
        try:
            if self._cancelled:
                return ("cancelled", "cancelled")
            if not self._conn.poll(seconds):
                self._kill()
                return ("timeout", f"took longer than {seconds:g} s (stopped)")
            outcome = self._conn.recv()
        except (EOFError, OSError):
            if self._cancelled:
                return ("cancelled", "cancelled")
            self._process.join(5)
            code = self._process.exitcode
            return ("crash", f"the reading process ended unexpectedly (exit status {code})")
        finally:
            self._conn.close()
        self._process.join(5)
        if outcome[0] == "memory":
            return ("memory", f"needed more than {mib} MiB of memory (stopped)")
        return outcome


def read_module_summary(path: str) -> dict[str, Any]:
    """Everything ``iree-lens inspect --output=json`` shows about a ``.vmfb`` (plain data)."""
    from engine.runtime.vmfb.describe import module_json
    from engine.runtime.vmfb.executables import executable_details
    from engine.runtime.vmfb.module import open_vmfb

    with open_vmfb(path) as module:
        data = module_json(module)
        for entry, x in zip(data["executables"], module.executables):
            entry["details"] = executable_details(x)
        return data
