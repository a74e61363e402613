"""Python's cyclic garbage collector runs on the GUI thread only.

A PySide6 object destroyed off the GUI thread can deadlock the process: its C++ destructor takes Qt's
locks and then the GIL, while the GUI thread holds the GIL and waits on the same locks. Reference
counting frees most objects where their last reference drops, but the *cyclic* collector runs on
whichever thread happens to allocate when its threshold is crossed — an engine worker listing Vulkan
devices, say — and then destroys every unreachable window, panel or lambda-captured widget there.

So, as Qt applications written in Python do (pyqtgraph ships the helper), automatic collection is
switched off and a GUI-thread timer collects instead. Threads other than the GUI thread never call
``gc.collect``.
"""

from __future__ import annotations

_collector = None


def collect_on_gui_thread(interval_s: float = 1.0):
    """Switch the collector to a timer on the calling (GUI) thread; idempotent. Needs a QApplication."""
    global _collector
    if _collector is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _collector = GarbageCollector(interval=interval_s)
    return _collector



def stop_collecting_on_gui_thread() -> None:
    """Back to Python's automatic collection (idempotent): for a process whose GUI part is over, such as a
    test run moving on from the window's tests to the engine's, which run no event loop to fire the timer."""
    global _collector
    if _collector is None:
        return
    import gc

    _collector.timer.stop()
    _collector = None
    gc.collect()  # what the GUI part left is destroyed here, on the GUI thread, before threads may collect
    gc.enable()
