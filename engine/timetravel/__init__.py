"""Reverse execution for the debug engine: positions, checkpoints, replay, reverse commands and watches."""

from engine.timetravel.engine import DispatchMark, TimeTravel, TimeTravelError, TravelStop
from engine.timetravel.recorder import RecordingInterpreter
from engine.timetravel.state import describe_state
from engine.timetravel.watch import BufferWatch, Change, GlobalWatch, RegisterWatch, watch_element

__all__ = [
    "BufferWatch",
    "Change",
    "DispatchMark",
    "GlobalWatch",
    "RecordingInterpreter",
    "RegisterWatch",
    "TimeTravel",
    "TimeTravelError",
    "TravelStop",
    "describe_state",
    "watch_element",
]
