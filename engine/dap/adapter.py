"""The Debug Adapter Protocol on top of the debug session (through ``SessionClient``).

``DebugAdapter(reader, writer, remote=None).run()`` serves one DAP client. Requests are read on the calling
thread; the session runs in this process (``TimeTravelSession``, so ``stepBack`` and ``reverseContinue``
work; ``ReferenceSession`` with ``"engine": "reference"``) or in a server started by ``remote``
(``iree-lens serve --stdio``, over ssh for another machine). Session events arrive on the session's thread
and become DAP events there (``stopped``, ``output``, ``exited``, ``terminated``); the answers to queries
(registers, bindings) are handed back to the request that waits for them.

Mapping (the names the DAP specification uses):

- ``launch``: ``program`` (a ``.vmfb``, the server's path), ``function`` (default ``main``, else the only
  export), ``inputs`` (``iree-run-module --input`` strings), ``device``, ``engine``, ``stopOnEntry``;
  the call starts at ``configurationDone``.
- function breakpoints: ``dispatch:ORDINAL`` or ``dispatch:GLOB`` (IREE's export names; ``... after`` to stop
  after it ran) are dispatch breakpoints, any other name a VM function's entry; instruction breakpoints take
  an ``instructionReference`` (``FUNCTION:0xPC`` as stack frames give it, or a pc alone, of the function
  ``disassemble`` or a frame last showed it in); each breakpoint that names nothing of the program is
  answered unverified with the reason (the request succeeds); the exception filters ``nan`` (after a
  dispatch writes NaN/Inf) and ``divergence`` (condition: ``REFERENCE [ATOL [RTOL]]``).
- ``stackTrace``: VM frames innermost first, ``instructionPointerReference`` ``FUNCTION:0xPC``
  (``disassemble`` takes it as its ``memoryReference``); at a dispatch, the dispatch itself on top (its name
  holds IREE's export name).
- ``scopes``: ``Dispatch`` (the paused dispatch's bindings; each has a ``memoryReference`` that
  ``readMemory`` reads, and expands to its place and elements), ``Registers``, ``Globals``.
- ``next``/``stepIn``/``stepOut``/``continue``; ``stepBack`` is gdb's reverse-next, ``reverseContinue``
  reverse-continue; ``pause``; ``disassemble`` (iree-dump-module's text; the server's module with
  ``remote``); ``evaluate`` (registers ``i3``/``r0``, ``binding N``); the end: ``exited`` (0, or 1 when the
  program failed) then ``terminated``.
- A program that fails (a VM trap such as a failed ``cf.assert``, a HAL error) stops with reason
  ``exception`` where it failed, as gdb stops at a fatal signal: ``stackTrace`` gives the failing frames,
  ``exceptionInfo`` IREE's status and message, ``stepBack``/``reverseContinue`` go back into the run's history
  (debug engine). ``continue`` or a step from there ends the program (``exited`` 1), as gdb's does after a
  fatal signal. ``exceptionInfo`` also describes the NaN/Inf and divergence stops.
"""

from __future__ import annotations

import base64
import bisect
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from engine.dap.framing import DapStreamError, MessageWriter, read_message
from engine.dispatch.typed_tensors import binding_label
from engine.errors import LensError
from engine.session.client import Notice, SessionClient, TransportFactory, in_process
from engine.session.module_queries import ReadDisassembly, disassembly
from engine.session.protocol import (
    BREAKPOINT_REFUSED,
    INITIALIZER,
    Answer,
    BindingInfo,
    Breakpoint,
    BreakpointKind,
    Crashed,
    DispatchInfo,
    DispatchWhen,
    Event,
    Failed,
    Finished,
    GlobalVariable,
    Opened,
    Query,
    ReadBinding,
    ReadDispatch,
    ReadGlobalBuffer,
    ReadGlobals,
    ReadRegisters,
    ReadTensors,
    ReverseMode,
    StepMode,
    Stopped,
    StopReason,
    TypeSource,
)

THREAD_ID = 1
EXCEPTION_FILTERS = [
    {
        "filter": "nan",
        "label": "NaN/Inf written",
        "description": "Stop after the first dispatch that writes NaN or Inf",
        "default": False,
    },
    {
        "filter": "divergence",
        "label": "Diverges from a reference",
        "description": "Stop after the first dispatch whose outputs differ from a reference run "
        "(condition: a capture bundle or .vmfb, then optional atol and rtol)",
        "default": False,
        "supportsCondition": True,
        "conditionDescription": "REFERENCE [ATOL [RTOL]]: a capture bundle folder or a .vmfb on the session's side",
    },
]
CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsFunctionBreakpoints": True,
    "supportsInstructionBreakpoints": True,
    "supportsDisassembleRequest": True,
    "supportsReadMemoryRequest": True,
    "supportsStepBack": True,
    "supportsSteppingGranularity": False,
    "supportsTerminateRequest": True,
    "supportsExceptionInfoRequest": True,
    "supportsExceptionFilterOptions": True,
    "exceptionBreakpointFilters": EXCEPTION_FILTERS,
}
# The requests served (each by ``_on_<snake_case>``).
REQUESTS = frozenset((
    "initialize", "launch", "configurationDone", "setFunctionBreakpoints", "setBreakpoints",
    "setInstructionBreakpoints", "setExceptionBreakpoints", "threads", "continue", "next", "stepIn", "stepOut",
    "stepBack", "reverseContinue", "pause", "stackTrace", "scopes", "variables", "evaluate", "readMemory",
    "disassemble", "exceptionInfo", "disconnect", "terminate",
))  # fmt: skip
_QUERY_TIMEOUT = 300.0
_MAX_ELEMENTS = 10_000  # elements one variables request returns when it names no count
_STOP_TIMEOUT = 30.0  # pause: a run that does not stop within this (a hung kernel) is ended


class RequestError(LensError):
    """A request the adapter cannot do now (answered with ``success: false`` and this message)."""


@dataclass
class _Frame:
    """A DAP stack frame of the current stop: the paused dispatch, or a VM frame (``depth`` from the top)."""

    name: str
    pc: int
    function: str
    depth: int | None = None  # registers query depth (-1 innermost); None for the dispatch frame
    dispatch: DispatchInfo | None = None


@dataclass
class _Stop:
    """What the adapter knows of the current stop; references handed out are valid until the run moves."""

    event: Stopped
    frames: list[_Frame] = field(default_factory=list)
    failure: Failed | None = None  # the program failed here: only going back or ending is possible
    variables: dict[int, Callable[[], list[dict[str, Any]]]] = field(default_factory=dict)
    bindings: dict[int, np.ndarray] = field(default_factory=dict)
    indexed: dict[int, Callable[[int, int], list[dict[str, Any]]]] = field(default_factory=dict)  # ref -> page


class DebugAdapter:
    def __init__(self, reader: BinaryIO, writer: BinaryIO, *, remote: str | None = None):
        self.reader = reader
        self.out = MessageWriter(writer)
        self.remote = remote
        self.client: SessionClient | None = None
        self.launch: dict[str, Any] = {}
        self.function = ""
        self.functions: tuple[str, ...] = ()
        self.engine = "debug"
        self.state = "idle"  # idle | launched | running | stopped | ended
        self.stop: _Stop | None = None
        self._answers: queue.Queue[Event] = queue.Queue()
        self._waiting = threading.Lock()  # one query at a time
        self._query_pending = False
        self._state_lock = threading.Lock()
        self._function_bps: list[Breakpoint] = []
        self._instruction_bps: list[Breakpoint] = []
        self._exception_bps: list[Breakpoint] = []
        self._breakpoint_ids: dict[Breakpoint, int] = {}  # DAP's Breakpoint.id, for "breakpoint" events
        self._pc_functions: dict[int, str] = {}  # pc -> function, for instruction references
        self._disassembly: dict[str, list] = {}
        self._ended = False
        self._done = threading.Event()

    # ------------------------------------------------------------------------------------ the loop

    def run(self) -> int:
        try:
            while not self._done.is_set():
                try:
                    message = read_message(self.reader)
                except DapStreamError as e:
                    self._output(f"iree-lens dap: {e}\n", "stderr")
                    return 1
                if message is None:
                    break
                if message.get("type") == "request":
                    self._dispatch(message)
        finally:
            self._close_session()
        return 0

    def _dispatch(self, request: dict[str, Any]) -> None:
        command = str(request.get("command", ""))
        handler = getattr(self, f"_on_{_snake(command)}", None) if command in REQUESTS else None
        if handler is None:
            self._respond(request, success=False, message=f"'{command}' is not supported by iree-lens dap")
            return
        try:
            body = handler(request.get("arguments") or {}, request)
        except (RequestError, LensError) as e:
            self._respond(request, success=False, message=str(e))
            return
        except Exception as e:  # a bug answers the request with its message instead of hanging the client
            self._respond(request, success=False, message=f"{type(e).__name__}: {e}")
            return
        if body is not _ANSWERED:
            self._respond(request, body=body)

    def _respond(self, request: dict, *, body: dict | None = None, success: bool = True, message: str = "") -> None:
        response: dict[str, Any] = {
            "type": "response",
            "request_seq": request.get("seq", 0),
            "success": success,
            "command": request.get("command", ""),
        }
        if not success:
            response["message"] = message
            response["body"] = {"error": {"id": 1, "format": message.replace("{", "(").replace("}", ")")}}
        elif body is not None:
            response["body"] = body
        self.out.write(response)

    def _event(self, event: str, body: dict | None = None) -> None:
        message: dict[str, Any] = {"type": "event", "event": event}
        if body is not None:
            message["body"] = body
        self.out.write(message)

    def _output(self, text: str, category: str = "console") -> None:
        self._event("output", {"category": category, "output": text})

    # ------------------------------------------------------------------------------ initialization

    def _on_initialize(self, args: dict, request: dict) -> dict:
        return dict(CAPABILITIES)

    def _on_launch(self, args: dict, request: dict) -> Any:
        if self.client is not None:
            raise RequestError("already launched")
        program = args.get("program")
        if not program:
            raise RequestError("launch needs 'program': the .vmfb to debug")
        self.launch = dict(args)
        self.engine = str(args.get("engine") or "debug")
        if self.engine not in ("debug", "reference"):
            raise RequestError(f"'engine' is debug or reference, not {self.engine!r}")
        self.client = SessionClient(
            self._transport(args.get("remote") or self.remote),
            notify=self._on_session_event,
            track_history=False,
            stop_timeout=_STOP_TIMEOUT,
        )
        try:
            self.client.connect()  # --remote: the server starts here
        except LensError as e:
            self.client = None
            raise RequestError(str(e)) from None
        device = str(args.get("device") or "local-sync")
        parameters = _strings(args, "parameters")  # ["[SCOPE=]FILE", ...], as iree-run-module's --parameters
        modules = _strings(args, "modules")  # ["a.vmfb", ...]: compiled modules it calls, as --module
        plugins = _strings(args, "executablePlugins")  # ["p.so", ...], as iree-run-module's --executable_plugin
        initializer = args.get("function") == INITIALIZER  # stopped in as a call (Open.initializer)
        opened = self._query(lambda: self.client.open(str(program), device, parameters=parameters,
                                                      initializer=initializer, modules=modules,
                                                      executable_plugins=plugins))
        if not isinstance(opened, Opened):
            raise RequestError(_message(opened))
        self.functions = opened.functions
        function = args.get("function") or ("main" if "main" in opened.functions else None)
        if function is None and len(opened.functions) == 1:
            function = opened.functions[0]
        if function not in opened.functions:
            raise RequestError(
                f"function {function!r} is not exported by {program} (exports: {', '.join(opened.functions)})"
            )
        self.function = function
        self.state = "launched"
        # Breakpoints set before the launch were answered verified (no module to judge them by): sent now,
        # those the session refuses are changed to unverified with the reason (a "breakpoint" event).
        early = self._function_bps + self._instruction_bps + self._exception_bps
        refused = self._apply_breakpoints() if early else {}
        self._respond(request)
        for bp, reason in refused.items():
            changed = {"id": self._breakpoint_ids[bp], "verified": False, "message": reason}
            self._event("breakpoint", {"reason": "changed", "breakpoint": changed})
        self._event("initialized")
        return _ANSWERED

    def _transport(self, remote: str | None) -> TransportFactory:
        """The session: in this process, or in ``iree-lens serve --stdio`` started by ``remote``."""
        handler = "reference" if self.engine == "reference" else "timetravel"
        if remote:
            from engine.session.stream import remote as remote_transport

            return remote_transport(str(remote), handler)
        if handler == "reference":
            from engine.session.reference_session import ReferenceSession as handler_class
        else:
            from engine.session.timetravel_session import TimeTravelSession as handler_class
        return in_process(handler_class)

    def _on_configuration_done(self, args: dict, request: dict) -> Any:
        self._need_launched()
        self._respond(request)
        inputs = tuple(str(i) for i in self.launch.get("inputs") or ())
        self._run(lambda: self.client.call(self.function, inputs, bool(self.launch.get("stopOnEntry"))))
        return _ANSWERED

    # --------------------------------------------------------------------------------- breakpoints

    def _on_set_function_breakpoints(self, args: dict, request: dict) -> dict:
        self._function_bps, answers = _parsed(
            args.get("breakpoints") or (),
            lambda spec: (function_breakpoint(str(spec.get("name", "")).strip()), {"verified": True}),
        )
        return {"breakpoints": self._judged(answers, self._apply_breakpoints())}

    def _on_set_breakpoints(self, args: dict, request: dict) -> dict:
        """Source lines are not where a .vmfb's code lives: each is answered unverified, saying what to use."""
        message = "a .vmfb has no source lines here: use function breakpoints (dispatch:NAME, a VM function) or instruction breakpoints"
        return {"breakpoints": [{"verified": False, "message": message} for _ in args.get("breakpoints") or ()]}

    def _on_set_instruction_breakpoints(self, args: dict, request: dict) -> dict:
        def instruction(spec: dict) -> tuple[Breakpoint, dict]:
            function, pc = self._instruction(spec.get("instructionReference"), spec.get("offset"))
            bp = Breakpoint(BreakpointKind.INSTRUCTION, function=function, pc=pc)
            return bp, {"verified": True, "instructionReference": instruction_reference(function, pc)}

        self._instruction_bps, answers = _parsed(args.get("breakpoints") or (), instruction)
        return {"breakpoints": self._judged(answers, self._apply_breakpoints())}

    def _on_set_exception_breakpoints(self, args: dict, request: dict) -> dict:
        options = [{"filterId": f} for f in args.get("filters") or ()] + list(args.get("filterOptions") or ())
        self._exception_bps, answers = _parsed(options, lambda option: (_exception_breakpoint(option), {"verified": True}))
        return {"breakpoints": self._judged(answers, self._apply_breakpoints())}

    def _judged(self, answers: list[tuple[Breakpoint | None, dict]], refused: dict[Breakpoint, str]) -> list[dict]:
        """DAP's Breakpoint answers in request order, each set one with its ``id``: one the session refused is
        unverified, with its reason (the DAP specification's way to say a breakpoint cannot be set; the
        request itself succeeds)."""
        out = []
        for bp, answer in answers:
            if bp is not None:
                answer = {"id": self._breakpoint_ids.setdefault(bp, len(self._breakpoint_ids) + 1), **answer}
                if bp in refused:
                    answer.update(verified=False, message=refused[bp])
            out.append(answer)
        return out

    def _apply_breakpoints(self) -> dict[Breakpoint, str]:
        """Send every breakpoint to the session; the ones it refused (they could never stop a run: no
        dispatch has that name, the diverge reference is not a bundle or module), each with its reason."""
        if self.client is None:
            return {}  # sent once the session exists (launch comes first in VS Code, but not always)
        breakpoints = self._function_bps + self._instruction_bps + self._exception_bps
        if self.state not in ("launched", "stopped"):
            self.client.set_breakpoints(breakpoints)
            return {}

        def send() -> Any:
            self.client.set_breakpoints(breakpoints)
            return self.client.query(ReadDispatch())  # SetBreakpoints answers only refusals: this comes after

        refusals: list[Failed] = []
        answer = self._query(send, refusals=refusals)
        if isinstance(answer, Failed):
            raise RequestError(answer.message)
        return {r.breakpoint: r.reason for failed in refusals for r in failed.refused}

    # ------------------------------------------------------------------------------------ running

    def _on_threads(self, args: dict, request: dict) -> dict:
        if self.client is None:  # nothing runs before launch (DAP clients ask early, and show what they get)
            return {"threads": []}
        return {"threads": [{"id": THREAD_ID, "name": self.function or "main"}]}

    def _on_continue(self, args: dict, request: dict) -> Any:
        return self._resume(request, lambda: self.client.continue_(), {"allThreadsContinued": True})

    def _on_next(self, args: dict, request: dict) -> Any:
        return self._resume(request, lambda: self.client.step(StepMode.OVER))

    def _on_step_in(self, args: dict, request: dict) -> Any:
        return self._resume(request, lambda: self.client.step(StepMode.INTO))

    def _on_step_out(self, args: dict, request: dict) -> Any:
        return self._resume(request, lambda: self.client.step(StepMode.OUT))

    def _on_step_back(self, args: dict, request: dict) -> Any:
        return self._reverse(request, ReverseMode.NEXT)

    def _on_reverse_continue(self, args: dict, request: dict) -> Any:
        return self._reverse(request, ReverseMode.CONTINUE)

    def _on_pause(self, args: dict, request: dict) -> dict | None:
        self._need_launched()
        if self.state == "running":
            self.client.stop()  # a run that does not stop within _STOP_TIMEOUT is ended (a hung kernel)
        return None

    def _resume(self, request: dict, action: Callable[[], Any], body: dict | None = None) -> Any:
        if self.state != "stopped":
            raise RequestError(f"the program is not stopped ({self.state})")
        self._respond(request, body=body)
        stop = self.stop
        if stop is not None and stop.failure is not None:
            # gdb after a fatal signal: the program cannot go on from where it failed, and ends.
            self._output(f"the program failed ({stop.failure.status or 'failed'}) and ends here\n", "stderr")
            self._end(1)
            return _ANSWERED
        self._run(action)
        return _ANSWERED

    def _reverse(self, request: dict, mode: str) -> Any:
        """Reverse commands run on the session's command loop (no pause): answer once they are done."""
        if self.engine == "reference":
            raise RequestError("the reference engine (IREE's runtime) has no history: use engine 'debug'")
        if self.state not in ("stopped", "ended") or self.client is None:
            raise RequestError(f"the program has no history here ({self.state})")
        outcome = self._query(lambda: self.client.reverse(mode, 1), until=(Stopped, Failed, Crashed))
        if not isinstance(outcome, Stopped):
            raise RequestError(_message(outcome))
        self._respond(request)
        self._stopped(outcome)
        return _ANSWERED

    def _run(self, action: Callable[[], Any]) -> None:
        with self._state_lock:
            self.state = "running"
            self.stop = None
        if action() is False:  # the client refused (not stopped): say where the program is
            self._output(f"iree-lens dap: the session is {self.client.state}\n", "stderr")

    # ------------------------------------------------------------------------------ session events

    def _on_session_event(self, event: Event | Notice) -> None:
        """On the session's thread: answers go to the waiting request, the rest become DAP events."""
        if isinstance(event, Notice):
            return  # the client's own bookkeeping (state, breakpoints): the adapter keeps what DAP needs
        if self._query_pending and isinstance(event, Answer | Opened | Failed | Stopped | Crashed):
            self._answers.put(event)
            return
        if isinstance(event, Stopped):
            self._stopped(event)
        elif isinstance(event, Finished):
            if event.results_text:
                self._output(event.results_text.rstrip("\n") + "\n", "stdout")
            self._end(0)
        elif isinstance(event, Failed):
            self._output(f"{event.message}\n", "stderr")
            if self.state == "running":
                self._failed(event)
        elif isinstance(event, Crashed):
            self._output(f"{event.reason}\n", "stderr")
            self._end(event.exitcode if isinstance(event.exitcode, int) and event.exitcode > 0 else 1)

    def _stopped(self, event: Stopped) -> None:
        stop = _Stop(event, frames=self._frames_of(event))
        for frame in stop.frames:
            self._pc_functions.setdefault(frame.pc, frame.function)
        with self._state_lock:
            self.stop, self.state = stop, "stopped"
        reason, description = _stop_reason(event)
        body: dict[str, Any] = {"reason": reason, "threadId": THREAD_ID, "allThreadsStopped": True}
        if description:
            body["description"] = description
            body["text"] = description
        self._event("stopped", body)

    def _failed(self, event: Failed) -> None:
        """The program failed: a stop where it failed (reason ``exception``), to inspect and go back from."""
        location = event.location
        stop = _Stop(Stopped("failed", location), frames=self._frames_of(Stopped("failed", location)), failure=event)
        for frame in stop.frames:
            self._pc_functions.setdefault(frame.pc, frame.function)
        with self._state_lock:
            self.stop, self.state = stop, "stopped"
        first = event.message.splitlines()[0] if event.message else "the program failed"
        self._event("stopped", {"reason": "exception", "threadId": THREAD_ID, "allThreadsStopped": True,
                                "description": f"the program failed: {first}", "text": event.message})  # fmt: skip

    def _end(self, code: int) -> None:
        with self._state_lock:
            if self._ended:
                return
            self._ended, self.state, self.stop = True, "ended", None
        self._event("exited", {"exitCode": code})
        self._event("terminated")

    def _query(
        self,
        send: Callable[[], Any],
        *,
        until: tuple[type, ...] = (Answer, Opened, Failed, Crashed),
        refusals: list[Failed] | None = None,
    ) -> Event:
        """Send a command through the client (``send``) and wait for its answer (commands are served in
        order). A client that refuses (``send`` returns False: not stopped, no history) is an error.
        ``refusals``: breakpoint refusals met on the way are kept there, and the wait goes on."""
        with self._waiting:
            self._query_pending = True
            try:
                if send() is False:
                    raise RequestError(f"not possible now (the session is {self.client.state})")
                while True:
                    try:
                        event = self._answers.get(timeout=_QUERY_TIMEOUT)
                    except queue.Empty:
                        raise RequestError(f"no answer from the session within {_QUERY_TIMEOUT:g} s") from None
                    if refusals is not None and isinstance(event, Failed) and event.status == BREAKPOINT_REFUSED:
                        refusals.append(event)
                        continue
                    if isinstance(event, until) or isinstance(event, Failed | Crashed):
                        if isinstance(event, Crashed):
                            threading.Thread(target=self._on_session_event, args=(event,), daemon=True).start()
                        return event
            finally:
                self._query_pending = False

    # ----------------------------------------------------------------------------------- inspection

    def _frames_of(self, event: Stopped) -> list[_Frame]:
        vm = list(reversed(event.location.frames))
        frames = [_Frame(f.function, f.pc, f.function, depth=-1 - k) for k, f in enumerate(vm)]
        info = event.location.dispatch_info
        if info is not None:
            top = vm[0] if vm else None
            name = f"{info.export} (dispatch #{info.ordinal}, {info.when})"
            frames.insert(0, _Frame(name, top.pc if top else 0, top.function if top else "", None, info))
        return frames

    def _on_stack_trace(self, args: dict, request: dict) -> dict:
        stop = self._need_stop()
        start = int(args.get("startFrame") or 0)
        levels = int(args.get("levels") or 0) or len(stop.frames)
        frames = []
        for k, frame in enumerate(stop.frames[start : start + levels], start=start):
            item: dict[str, Any] = {
                "id": k + 1,
                "name": frame.name,
                "line": 0,
                "column": 0,
                "instructionPointerReference": instruction_reference(frame.function, frame.pc),
            }
            if frame.dispatch is not None:
                item["presentationHint"] = "label"
            frames.append(item)
        return {"stackFrames": frames, "totalFrames": len(stop.frames)}

    def _on_scopes(self, args: dict, request: dict) -> dict:
        stop = self._need_stop()
        frame = self._frame(stop, args.get("frameId"))
        scopes = []
        dispatch = stop.event.location.dispatch_info
        if dispatch is not None:
            ref = self._reference(stop, lambda: self._binding_variables(stop, dispatch))
            scopes.append({"name": "Dispatch", "variablesReference": ref, "expensive": False,
                           "namedVariables": len(dispatch.bindings)})
        depth = frame.depth if frame.depth is not None else -1
        if stop.frames and any(f.depth is not None for f in stop.frames):
            ref = self._reference(stop, lambda: self._register_variables(depth))
            scopes.append({"name": "Registers", "presentationHint": "registers", "variablesReference": ref,
                           "expensive": False})
            ref = self._reference(stop, self._global_variables)
            scopes.append({"name": "Globals", "variablesReference": ref, "expensive": False})
        return {"scopes": scopes}

    def _on_variables(self, args: dict, request: dict) -> dict:
        stop = self._need_stop()
        ref = int(args.get("variablesReference", 0))
        producer = stop.variables.get(ref)
        if producer is None:
            raise RequestError("these variables belong to an earlier stop")
        start, count = int(args.get("start") or 0), int(args.get("count") or 0)
        if ref in stop.indexed:  # a tensor's elements: only the page asked for
            return {"variables": stop.indexed[ref](max(start, 0), count)}
        variables = producer()
        if start or count:
            variables = variables[start : start + count if count else None]
        return {"variables": variables}

    def _register_variables(self, depth: int) -> list[dict[str, Any]]:
        registers = self._ask(ReadRegisters(depth)).registers
        out = [{"name": f"i{k}", "value": str(v), "type": "i32", "variablesReference": 0}
               for k, v in enumerate(registers.i32)]
        out += [{"name": f"r{k}", "value": str(v), "type": "ref", "variablesReference": 0}
                for k, v in enumerate(registers.ref)]
        return out

    def _global_variables(self) -> list[dict[str, Any]]:
        answer = self._ask(ReadGlobals())
        if answer.variables:  # named by the compilation's VM phase: each global once, by its name; a
            # buffer's bytes are readable memory (readMemory globalN: VS Code's hex view)
            return [{"name": f"@{v.name}", "value": _global_value(v), "type": v.tensor_type or v.kind,
                     "variablesReference": 0,
                     **({"memoryReference": f"{GLOBAL_MEMORY}{v.index}"} if v.byte_length is not None else {})}
                    for v in answer.variables]  # fmt: skip
        data = bytes(answer.rwdata)
        out = []
        for offset in range(0, len(data) - len(data) % 4, 4):
            word = int.from_bytes(data[offset : offset + 4], "little")
            out.append({"name": f"rwdata[{offset}]", "value": str(word), "type": "i32", "variablesReference": 0})
        out += [{"name": f"ref{k}", "value": str(v), "type": "ref", "variablesReference": 0}
                for k, v in enumerate(answer.refs)]
        return out

    def _binding_variables(self, stop: _Stop, info: DispatchInfo) -> list[dict[str, Any]]:
        # The tensors in each binding as the session typed them (engine.dispatch.typed_tensors: the
        # executables' sources; without them a binding is untyped bytes, never a shape guessed from a name).
        # After a rebuild of the sources in progress, as a debug script waits: a variables request answers
        # the same whenever it comes (a client cannot know to ask again once the rebuild is done).
        tensors = self._ask(ReadTensors(wait_for_sources=True)).tensors
        out = []
        for binding in info.bindings:
            typed = "; ".join(
                f"{binding_label(t.index, t.access, t.role, t.position)}: "
                f"{'x'.join([*map(str, t.tensor.shape), t.tensor.element_type])} @{t.offset} "
                f"(type from {t.type_source}"
                + (f"; {t.undefined_bytes} bytes never written before this dispatch: undefined" if t.undefined_bytes
                   else "; which bytes earlier dispatches defined is unknown" if t.undefined is None else "")
                + ")"
                for t in tensors
                if t.index == binding.index and t.type_source != TypeSource.UNTYPED
            ) or "untyped"
            held = sorted({t.global_name for t in tensors if t.index == binding.index and t.global_name})
            value = (f"{typed}, {binding.length} bytes at {binding.buffer}+{binding.offset}, {binding.access}"
                     + (f", in global {', '.join(held)}" if held else ""))  # fmt: skip
            # Elements as the typed tensors' element when they agree on one, else bytes.
            elements = {t.tensor.element_type for t in tensors
                        if t.index == binding.index and t.type_source != TypeSource.UNTYPED}
            element = elements.pop() if len(elements) == 1 else None
            fields = self._reference(stop, lambda b=binding, g=element, t=typed: self._binding_fields(stop, b, g, t))
            out.append({
                "name": f"binding {binding.index}",
                "value": value,
                "type": "binding",
                "variablesReference": fields,
                "memoryReference": memory_reference(info, binding.index),
            })
        return out

    def _binding_fields(self, stop: _Stop, binding: BindingInfo, element: str | None, typed: str) -> list[dict[str, Any]]:
        """A binding expanded: where its bytes are, and its elements (of the session's typed tensors' element
        type, else bytes)."""
        from engine.dispatch.tensor_types import element_dtype

        try:
            dtype = element_dtype(element) if element else np.dtype(np.uint8)
        except ValueError:
            dtype = np.dtype(np.uint8)
        count = binding.length // dtype.itemsize

        def elements(start: int, n: int) -> list[dict[str, Any]]:
            data = self._binding_bytes(stop, binding.index)
            view = data[: count * dtype.itemsize].view(dtype)
            end = min(count, start + (n if n > 0 else _MAX_ELEMENTS))
            return [{"name": f"[{k}]", "value": str(view[k]), "variablesReference": 0} for k in range(start, end)]

        ref = self._reference(stop, lambda: elements(0, min(count, 1000)))
        stop.indexed[ref] = elements
        plain = [("buffer", binding.buffer), ("offset", binding.offset), ("length", binding.length),
                 ("access", binding.access), ("type", typed)]
        out = [{"name": k, "value": str(v), "variablesReference": 0} for k, v in plain]
        out.append({"name": "elements", "value": f"{count} x {dtype.name}", "variablesReference": ref,
                    "indexedVariables": count})
        return out

    def _binding_bytes(self, stop: _Stop, index: int) -> np.ndarray:
        """The paused dispatch's binding ``index`` as bytes (asked once a stop)."""
        data = stop.bindings.get(index)
        if data is None:
            tensor = self._ask(ReadBinding(index)).tensor.to_numpy()
            data = stop.bindings[index] = np.ascontiguousarray(tensor).view(np.uint8).reshape(-1)
        return data

    def _reference(self, stop: _Stop, producer: Callable[[], list[dict[str, Any]]]) -> int:
        ref = len(stop.variables) + 1
        stop.variables[ref] = producer
        return ref

    def _on_evaluate(self, args: dict, request: dict) -> dict:
        """Watch and hover expressions: a register of the frame (``i3``, ``r0``), a global by name (``@state``)
        or a binding (``binding 1``)."""
        stop = self._need_stop()
        expression = str(args.get("expression", "")).strip()
        frame = self._frame(stop, args["frameId"]) if args.get("frameId") is not None else stop.frames[0]
        bank, number = expression[:1], expression[1:]
        if bank in ("i", "r") and number.isdigit():
            depth = frame.depth if frame.depth is not None else -1
            registers = self._ask(ReadRegisters(depth)).registers
            values = registers.i32 if bank == "i" else registers.ref
            if int(number) >= len(values):
                raise RequestError(f"{expression}: the frame has {len(values)} {bank} registers")
            return {"result": str(values[int(number)]), "variablesReference": 0}
        words = expression.split()
        info = stop.event.location.dispatch_info
        if len(words) == 2 and words[0] == "binding" and words[1].isdigit() and info is not None:
            variables = self._binding_variables(stop, info)
            if int(words[1]) >= len(variables):
                raise RequestError(f"{expression}: the dispatch has {len(variables)} bindings")
            variable = variables[int(words[1])]
            return {"result": variable["value"], "variablesReference": variable["variablesReference"],
                    "memoryReference": variable["memoryReference"]}
        if expression.startswith("@"):  # a global by the name the Globals scope lists
            found = next((v for v in self._global_variables() if v["name"] == expression), None)
            if found is None:
                raise RequestError(f"{expression}: no such global (the Globals scope lists the module's)")
            memory = {"memoryReference": found["memoryReference"]} if "memoryReference" in found else {}
            return {"result": found["value"], "variablesReference": 0, **memory}
        raise RequestError(f"{expression!r}: iree-lens evaluates registers (i3, r0), globals (@state) and, at a "
                           "dispatch, bindings (binding 1)")  # fmt: skip

    def _on_read_memory(self, args: dict, request: dict) -> dict:
        stop = self._need_stop()
        reference = str(args.get("memoryReference", ""))
        if reference.startswith(GLOBAL_MEMORY):  # a buffer global's bytes now
            try:
                ordinal = int(reference[len(GLOBAL_MEMORY) :])
            except ValueError:
                raise RequestError(f"{reference!r} is not a global's memory reference (globalN)") from None
            data = self._ask(ReadGlobalBuffer(ordinal)).tensor.to_numpy().reshape(-1).view(np.uint8)
        else:
            info = stop.event.location.dispatch_info
            ordinal, index = parse_memory_reference(reference)
            if info is None or info.ordinal != ordinal:
                raise RequestError(f"dispatch #{ordinal} is not the paused dispatch: its bindings are gone")
            data = self._binding_bytes(stop, index)
        offset, count = int(args.get("offset") or 0), int(args.get("count") or 0)
        start = max(offset, 0)
        end = min(offset + count, data.size)
        piece = data[start:end].tobytes() if end > start else b""
        body: dict[str, Any] = {"address": f"0x{start:x}", "data": base64.b64encode(piece).decode("ascii")}
        unreadable = count - len(piece)
        if unreadable > 0:
            body["unreadableBytes"] = unreadable
        return body

    def _on_disassemble(self, args: dict, request: dict) -> dict:
        function, pc = self._instruction(args.get("memoryReference"), args.get("offset"))
        lines = self._function_lines(function)
        at = max(bisect.bisect_right([line_pc for line_pc, _ in lines], pc) - 1, 0)
        start = at + int(args.get("instructionOffset") or 0)
        count = int(args.get("instructionCount") or 0)
        out = []
        for k in range(start, start + count):
            if 0 <= k < len(lines):
                line_pc, text = lines[k]
                item = {"address": f"0x{line_pc:x}", "instruction": text}
                if k == 0:
                    item["symbol"] = function
                out.append(item)
                self._pc_functions.setdefault(line_pc, function)
            else:
                out.append({"address": f"0x{max(k, 0):x}", "instruction": "", "presentationHint": "invalid"})
        return {"instructions": out}

    def _function_lines(self, function: str) -> list[tuple[int, str]]:
        """``(pc, text)`` of ``function``'s instructions as iree-dump-module prints them: read from the module
        here, or asked of a remote session's server (the module is on its side)."""
        lines = self._disassembly.get(function)
        if lines is None:
            query = ReadDisassembly(function)
            if self.launch.get("remote") or self.remote:
                lines = self._ask(query).lines
            else:
                lines = disassembly(str(self.launch.get("program", "")), query).lines
            self._disassembly[function] = lines
        return lines

    # ------------------------------------------------------------------------------------- the end

    def _on_exception_info(self, args: dict, request: dict) -> dict:
        """What stopped the program: IREE's status and message where it failed; the NaN/Inf or divergence a
        dispatch wrote where an exception filter stopped it."""
        stop = self._need_stop()
        failure = stop.failure
        if failure is not None:
            stack = "\n".join(f"{f.module}.{f.function} pc {f.pc:#x}" + (f" ({f.instruction})" if f.instruction else "")
                              for f in reversed(failure.location.frames))  # fmt: skip
            details: dict[str, Any] = {"message": failure.message, "typeName": f"IREE status {failure.status or 'unknown'}"}
            if stack:
                details["stackTrace"] = stack
            first = failure.message.splitlines()[0] if failure.message else ""
            return {"exceptionId": failure.status or "failed", "description": first, "breakMode": "always",
                    "details": details}  # fmt: skip
        reason, description = _stop_reason(stop.event)
        if reason != "exception":
            raise RequestError("the program is not stopped at an exception (a failure, NaN/Inf or divergence)")
        kind = "nan" if stop.event.detail.nan_bindings else "divergence"
        return {"exceptionId": kind, "description": description, "breakMode": "always"}

    def _on_disconnect(self, args: dict, request: dict) -> dict | None:
        self._close_session()
        self._done.set()
        return None

    def _on_terminate(self, args: dict, request: dict) -> Any:
        self._respond(request)
        self._close_session()
        self._end(0 if self._ended else 1)
        return _ANSWERED

    def _close_session(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                if self.state == "running" and client.transport is not None:
                    client.transport.pause()  # a running call stops first, so the session can close at once
                client.shutdown()
            except (OSError, LensError):
                pass

    # ------------------------------------------------------------------------------------- helpers

    def _need_launched(self) -> None:
        if self.client is None:
            raise RequestError("launch a program first")

    def _need_stop(self) -> _Stop:
        stop = self.stop
        if stop is None:
            raise RequestError(f"the program is not stopped ({self.state})")
        return stop

    def _frame(self, stop: _Stop, frame_id: Any) -> _Frame:
        try:
            return stop.frames[int(frame_id) - 1]
        except (TypeError, ValueError, IndexError):
            raise RequestError(f"no frame {frame_id!r} in this stop") from None

    def _instruction(self, reference: Any, offset: Any = 0) -> tuple[str, int]:
        """The function and pc an instruction reference names: ``FUNCTION:0xPC`` (what stack frames and
        breakpoints give: pcs alone are ambiguous, every function starts at 0), or a pc alone, of the
        function it was last seen in (stack frames, disassembly), else of the innermost frame."""
        function, pc = parse_instruction_reference(reference)
        pc += int(offset or 0)
        return function or self._pc_functions.get(pc) or self._top_function(), pc

    def _top_function(self) -> str:
        stop = self.stop
        for frame in stop.frames if stop else ():
            if frame.function:
                return frame.function
        return self.function

    def _ask(self, query: Query) -> Any:
        answer = self._query(lambda: self.client.query(query))
        if not isinstance(answer, Answer):
            raise RequestError(_message(answer))
        return answer


_ANSWERED = object()  # a handler that wrote its own response (before events that must follow it)


# --------------------------------------------------------------------------------------------- naming


def function_breakpoint(name: str) -> Breakpoint:
    """A DAP function breakpoint name as a session breakpoint: ``dispatch:ORDINAL``, ``dispatch:GLOB``
    (``... after`` for after it ran), else the entry of a VM function."""
    if not name:
        raise RequestError("a function breakpoint needs a name")
    if not name.startswith("dispatch:"):
        return Breakpoint(BreakpointKind.FUNCTION, function=name)
    target, *rest = name[len("dispatch:") :].split()
    when = rest[0] if rest else DispatchWhen.BEFORE
    if when not in (DispatchWhen.BEFORE, DispatchWhen.AFTER) or len(rest) > 1:
        raise RequestError(f"{name!r}: dispatch:ORDINAL|GLOB [before|after]")
    if target.isdigit():
        return Breakpoint(BreakpointKind.DISPATCH, ordinal=int(target), when=when)
    return Breakpoint(BreakpointKind.DISPATCH, dispatch=target, when=when)


def _global_value(v: GlobalVariable) -> str:
    """A named global's value: a number, or its ref's description with a buffer's size and tensor type."""
    if v.byte_length is None:
        return v.value
    return f"{v.value} ({v.byte_length} bytes{', ' + v.tensor_type if v.tensor_type else ''})"


GLOBAL_MEMORY = "global"  # a buffer global's memory reference: global<ref ordinal>


def memory_reference(info: DispatchInfo, index: int) -> str:
    return f"dispatch{info.ordinal}.binding{index}"


def parse_memory_reference(text: str) -> tuple[int, int]:
    head, _, tail = text.partition(".binding")
    try:
        if not head.startswith("dispatch"):
            raise ValueError
        return int(head[len("dispatch") :]), int(tail)
    except ValueError:
        raise RequestError(f"{text!r} is not a binding's memory reference (dispatchN.bindingK)") from None


def instruction_reference(function: str, pc: int) -> str:
    """A stack frame's or breakpoint's instruction reference: ``FUNCTION:0xPC`` (``break pc``'s spelling)."""
    return f"{function}:0x{pc:x}" if function else f"0x{pc:x}"


def parse_instruction_reference(reference: Any) -> tuple[str | None, int]:
    """``(function, pc)`` of ``FUNCTION:PC`` or a pc alone (function None)."""
    function, _, pc = str(reference).rpartition(":")
    try:
        return function or None, int(pc, 0)
    except ValueError:
        raise RequestError(
            f"{reference!r} is not an instruction reference (FUNCTION:0xPC as stack frames give them, or a pc such as 0x1c)"
        ) from None


def _stop_reason(event: Stopped) -> tuple[str, str]:
    detail = event.detail
    info = event.location.dispatch_info
    if detail.nan_bindings:
        return "exception", f"NaN/Inf written by dispatch #{info.ordinal} {info.export} to bindings {list(detail.nan_bindings)}"
    if detail.divergence is not None:
        return "exception", detail.divergence.text or "diverged from the reference"
    reason = str(event.reason)
    if reason == StopReason.ENTRY:
        return "entry", ""
    if reason == StopReason.PAUSED:
        return "pause", ""
    if reason == StopReason.DISPATCH:
        where = f"{info.when} dispatch #{info.ordinal} {info.export}" if info else "at a dispatch"
        return ("function breakpoint" if detail.breakpoints else "step"), where
    if reason == StopReason.BREAKPOINT:
        return "breakpoint", ""
    if reason == "history-start":
        return "step", "the start of the recorded history"
    if info is not None:  # a step that ends inside a command buffer (a reverse step): which dispatch
        return "step", f"{info.when} dispatch #{info.ordinal} {info.export}"
    return "step", ""


def _message(event: Any) -> str:
    return getattr(event, "message", None) or getattr(event, "reason", None) or repr(event)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _parsed(specs, make) -> tuple[list[Breakpoint], list[tuple[Breakpoint | None, dict]]]:
    """Each DAP breakpoint spec made into a breakpoint by ``make`` (spec -> (breakpoint, its answer)); one
    ``make`` refuses (``RequestError``) is answered unverified with the reason, in request order."""
    bps: list[Breakpoint] = []
    answers: list[tuple[Breakpoint | None, dict]] = []
    for spec in specs:
        try:
            bp, answer = make(spec)
        except RequestError as e:
            answers.append(_unverified(str(e)))
            continue
        bps.append(bp)
        answers.append((bp, answer))
    return bps, answers


def _unverified(message: str) -> tuple[None, dict]:
    return None, {"verified": False, "message": message}


def _exception_breakpoint(option: dict) -> Breakpoint:
    """The breakpoint of one exception filter option (``nan``; ``divergence`` with REFERENCE [ATOL [RTOL]])."""
    kind = option.get("filterId")
    if kind == "nan":
        return Breakpoint(BreakpointKind.NAN)
    if kind != "divergence":
        raise RequestError(f"no exception filter {kind!r} (nan, divergence)")
    words = str(option.get("condition") or "").split()
    if not words:
        raise RequestError("the divergence filter needs a condition: REFERENCE [ATOL [RTOL]] (a capture bundle or .vmfb)")
    try:
        tolerances = [float(w) for w in words[1:3]]
    except ValueError:
        raise RequestError(f"bad tolerance in {option.get('condition')!r}") from None
    atol, rtol = (tolerances + [None, None])[:2]
    return Breakpoint(BreakpointKind.DIVERGE, reference=words[0], atol=atol, rtol=rtol)


def _strings(args: dict, key: str) -> tuple[str, ...]:
    """A launch argument that lists files (one string, or a list of them), as strings."""
    value = args.get(key) or ()
    return (str(value),) if isinstance(value, str) else tuple(str(v) for v in value)
