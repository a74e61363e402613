"""``iree-lens dap`` when the program fails: a stop where it failed (reason ``exception``), as gdb stops at a
fatal signal, not the end of the session. The client inspects the failing frame, asks ``exceptionInfo``,
goes back into the history and forward again; ``continue`` from the failure ends the program (exit code 1).

The program (``session_programs/square_assert.mlir``) squares its input in a dispatch, reads the first square
back on the host and asserts it is negative (``cf.assert``: IREE's ``vm.fail`` with FAILED_PRECONDITION). Every message is validated against the
DAP schema (``support.dap``)."""

from __future__ import annotations

import re

import pytest
from support.dap import DapClient, lens_command
from support.session import compile_program

pytest.importorskip("fastjsonschema", reason="fastjsonschema (the test extra) validates DAP messages")

FAILED_PRECONDITION = 9  # IREE's status code (iree/base/status.h), the one cf.assert fails with


@pytest.fixture(scope="module")
def trap(tmp_path_factory):
    return compile_program("square_assert", "llvm-cpu", tmp_path_factory.mktemp("dap_trap"))


def _launched(vmfb, **extra) -> DapClient:
    client = DapClient([*lens_command(), "dap"])
    caps = client.request("initialize", {"adapterID": "iree-lens"})["body"]
    assert caps["supportsExceptionInfoRequest"] is True
    client.request("launch", {"program": str(vmfb), "function": "main", "inputs": ["4xf32=1 2 3 4"], **extra})
    client.wait_event("initialized")
    return client


def test_a_failing_program_stops_where_it_failed_and_can_be_inspected(trap):
    client = _launched(trap)
    try:
        client.request("configurationDone")
        stop = client.stopped()
        assert stop["reason"] == "exception"
        assert "the square was not negative" in stop["description"] and "FAILED_PRECONDITION" in stop["text"]
        [frame] = client.request("stackTrace", {"threadId": 1})["body"]["stackFrames"]
        assert frame["name"] == "main"
        info = client.request("exceptionInfo", {"threadId": 1})["body"]
        assert info["exceptionId"] == "FAILED_PRECONDITION" and info["breakMode"] == "always"
        assert "the square was not negative" in info["description"]
        assert info["details"]["stackTrace"] == f"module.main pc {int(frame['instructionPointerReference'].split(':')[1], 16):#x}"
        # The failing frame's registers: the one vm.fail names ("at: vm.fail %i0, ...") holds the status code.
        register = re.search(r"vm\.fail %(i\d+)", stop["text"]).group(1)
        scopes = {s["name"]: s for s in client.request("scopes", {"frameId": 1})["body"]["scopes"]}
        registers = client.request("variables", {"variablesReference": scopes["Registers"]["variablesReference"]})
        values = {v["name"]: v["value"] for v in registers["body"]["variables"]}
        assert values[register] == str(FAILED_PRECONDITION)
        # gdb after a fatal signal: going on ends the program.
        client.request("continue", {"threadId": 1})
        assert client.wait_event("exited")["body"]["exitCode"] == 1
        client.wait_event("terminated")
    finally:
        client.close()


def test_back_from_a_failure_into_the_history_and_forward_to_it_again(trap):
    client = _launched(trap)
    try:
        client.request("setFunctionBreakpoints", {"breakpoints": [{"name": "dispatch:0 after"}]})
        client.request("configurationDone")
        assert client.stopped()["reason"] == "function breakpoint"
        client.request("continue", {"threadId": 1})
        assert client.stopped()["reason"] == "exception"
        failed_at = client.top_frame()["instructionPointerReference"]
        # One instruction back: before vm.fail, no longer a failure (nothing to describe as an exception).
        client.request("stepBack", {"threadId": 1})
        assert client.stopped()["reason"] == "step"
        before = client.top_frame()["instructionPointerReference"]
        assert before.split(":")[0] == "main" and int(before.split(":")[1], 16) < int(failed_at.split(":")[1], 16)
        reply = client.request("exceptionInfo", {"threadId": 1}, ok=False)
        assert reply["success"] is False and "not stopped at an exception" in reply["message"]
        # Back to the dispatch breakpoint, its output readable: the squares the assertion read.
        client.request("reverseContinue", {"threadId": 1})
        stop = client.stopped()
        assert "dispatch #0" in stop.get("description", "")
        # Forward again: the program fails at the same place.
        client.request("continue", {"threadId": 1})
        assert client.stopped()["reason"] == "exception"
        assert client.top_frame()["instructionPointerReference"] == failed_at
        client.request("disconnect", {})
    finally:
        client.close()
