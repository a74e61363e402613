"""``engine.folder_lock``: two processes (here two threads, each with its own lock descriptor, which flock
treats alike) filling one cache folder of the temporary directory take turns instead of overwriting each
other's files half way (the kernel stepper's rebuilds, /tmp/iree-lens-kernel/KEY)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from engine.folder_lock import folder_lock


def test_two_holders_of_one_folder_take_turns_and_the_second_sees_the_first_ones_result(tmp_path):
    out = tmp_path / "cache" / "key"
    spans: list[tuple[float, float]] = []
    found: list[bool] = []
    guard = threading.Lock()

    def fill(_) -> None:
        with folder_lock(out):
            start = time.monotonic()
            found.append((out / "done").exists())  # the second finds the first one's result
            out.mkdir(parents=True, exist_ok=True)
            (out / "part").write_text("half")
            time.sleep(0.3)  # the work the other holder must not interleave with (a compile)
            (out / "done").write_text("whole")
            with guard:
                spans.append((start, time.monotonic()))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(fill, range(2)))
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, spans  # never both inside
    assert sorted(found) == [False, True]


def test_another_folder_is_not_held(tmp_path):
    entered = threading.Event()

    def other() -> None:
        with folder_lock(tmp_path / "b"):
            entered.set()

    with folder_lock(tmp_path / "a"):
        t = threading.Thread(target=other)
        t.start()
        assert entered.wait(timeout=5), "a lock on another folder waited for this one"
    t.join(timeout=5)
