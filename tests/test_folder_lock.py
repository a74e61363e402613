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


def test_a_cancelled_wait_gives_up_without_the_lock(tmp_path):
    # rebuild_sources waits this way: a session closed while another process rebuilds the same module must
    # not wait for that whole compile.
    out = tmp_path / "key"
    stop = threading.Event()
    answers: list[bool] = []

    def waiter() -> None:
        with folder_lock(out, stop.is_set) as held:
            answers.append(held)

    with folder_lock(out) as held:
        assert held
        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.5)
        assert not answers  # still waiting while the folder is held
        stop.set()
        t.join(timeout=5)
        assert answers == [False]  # gave up while the first holder still held it
    with folder_lock(out, stop.is_set) as held:
        assert held  # a free folder is taken even when cancelled is already true
