"""IREE's HAL replay files (``.ireereplay``): reading (``reader``, ``payloads``), the listing that
``iree-dump-replay`` prints (``projection``), and reissuing a replay on the emulated HAL (``execute``)."""

from engine.replay.reader import ReplayFile, open_replay

__all__ = ["ReplayFile", "open_replay"]
