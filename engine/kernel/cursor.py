"""A position in a recorded workgroup, moved like a debugger's: statement by statement (F11), line by line
(F10), both backwards, to the first NaN/Inf, to a line, or to the store that wrote a given byte. The record is
whole, so going back is as cheap as going forward and shows the same values."""

from __future__ import annotations

from engine.kernel.trace import KernelStep, KernelTrace


class KernelCursor:
    def __init__(self, trace: KernelTrace, position: int = 0):
        self.trace = trace
        self.position = min(max(position, 0), max(len(trace.steps) - 1, 0))

    @property
    def current(self) -> KernelStep | None:
        return self.trace.steps[self.position] if self.trace.steps else None

    def go(self, index: int) -> KernelStep | None:
        if self.trace.steps:
            self.position = min(max(index, 0), len(self.trace.steps) - 1)
        return self.current

    def step(self) -> KernelStep | None:
        """The next statement (F11)."""
        return self.go(self.position + 1)

    def step_back(self) -> KernelStep | None:
        """The previous statement (Shift+F11)."""
        return self.go(self.position - 1)

    def _line(self, index: int):
        s = self.trace.steps[index]
        return (s.location.file, s.location.line) if s.location is not None else None

    def step_over(self) -> KernelStep | None:
        """The next statement on another source line (F10)."""
        steps = self.trace.steps
        if not steps:
            return None
        here = self._line(self.position)
        k = self.position + 1
        while k < len(steps) - 1 and (self._line(k) == here or self._line(k) is None):
            k += 1
        return self.go(k)

    def step_back_over(self) -> KernelStep | None:
        """The first statement of the previous source line run (Shift+F10)."""
        steps = self.trace.steps
        if not steps:
            return None
        here = self._line(self.position)
        k = self.position - 1
        while k > 0 and (self._line(k) == here or self._line(k) is None):
            k -= 1
        line = self._line(k)
        while k > 0 and self._line(k - 1) == line:
            k -= 1
        return self.go(k)

    def run_to_nan(self) -> KernelStep | None:
        """The first statement after this one with a NaN/Inf value (stays put, returning None, if none)."""
        for s in self.trace.steps[self.position + 1 :]:
            if s.nonfinite:
                return self.go(s.index)
        return None

    def run_to_line(self, line: int, file: str | None = None) -> KernelStep | None:
        for s in self.trace.steps[self.position + 1 :]:
            if s.location is not None and s.location.line == line and (file is None or s.location.file == file):
                return self.go(s.index)
        return None

    def store_that_wrote(self, binding: int, offset: int) -> KernelStep | None:
        """The last recorded store covering byte ``offset`` of ``binding`` (the element's writer), moved to."""
        for s in reversed(self.trace.steps):
            st = s.store
            if st is None or st.binding != binding:
                continue
            count = len(st.value) if isinstance(st.value, list) else 1
            if st.offset <= offset < st.offset + count * st.element_bytes:
                return self.go(s.index)
        return None
