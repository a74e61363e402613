"""Failed expectations, collected while a program runs and reported after the call (as IREE's check tool:
a failed expectation does not stop the function)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckFailure:
    """One failed expectation: the exported function being run, the check import and IREE-style text."""

    function: str | None
    expectation: str  # "expect_eq", "expect_almost_eq", ...
    message: str

    def describe(self) -> str:
        where = f"@{self.function}: " if self.function else ""
        return f"{where}check.{self.expectation} failed: {self.message}"


@dataclass
class CheckRecorder:
    """Where both engines' ``check`` modules put their failures; ``function`` names the call under way."""

    function: str | None = None
    failures: list[CheckFailure] = field(default_factory=list)

    def begin(self, function: str) -> None:
        """A new call of ``function`` starts; failures recorded from now on name it."""
        self.function = function

    def record(self, expectation: str, message: str | None) -> None:
        if message is not None:
            self.failures.append(CheckFailure(self.function, expectation, message))

    def report(self) -> str:
        """All failures, one block each, for a terminal."""
        return "".join(f.describe() + "\n" for f in self.failures)
