"""Swapping what a loaded ``HalExecutable`` runs, while the program holds it (hot substitution).

The VM keeps the ``!hal.executable`` refs it created (usually in globals set by ``__init``), so a substitution
replaces the object's ``impl`` (the device's loaded library or Vulkan executable) rather than the ref:
the next dispatch of any command buffer, recorded or not, runs the new code. An ``ExportOverlay`` replaces
only some exports of an executable (one dispatch of a linked CPU library); ``revert`` puts the original back.

Each device keeps an ``ExecutableRegistry``: the executables it created (so a session finds the one
loaded from a module's rodata segment) and hooks called on each new one (so a substitution given before the
run applies from the first dispatch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.runtime.hal.device import HalExecutable


class ExecutableRegistry:
    """The executables one device created, in order, and the hooks that see each new one."""

    def __init__(self) -> None:
        self.loaded: list[HalExecutable] = []
        self.hooks: list[Callable[[HalExecutable], None]] = []
        self.originals: dict[int, tuple[Any, tuple[str, ...]]] = {}  # id(executable) -> (impl, export names)

    def created(self, executable: HalExecutable, constants: tuple[int, ...] = ()) -> HalExecutable:
        executable.constants = tuple(constants)  # type: ignore[attr-defined]  # a replacement loads with them
        self.loaded.append(executable)
        for hook in list(self.hooks):
            hook(executable)
        return executable

    def by_label(self, label: str) -> list[HalExecutable]:
        return [e for e in self.loaded if e.label == label]


def registry(device: Any) -> ExecutableRegistry:
    """The device's registry (made on first use)."""
    found = getattr(device, "executable_registry", None)
    if found is None:
        found = ExecutableRegistry()
        device.executable_registry = found
    return found


class ExportOverlay:
    """An executable's impl with some exports served by other loaded executables.

    ``routes`` maps an export ordinal of ``base`` to ``(impl, ordinal)`` of a replacement. It answers what
    the devices ask: ``exports`` and ``dispatch`` (CPU libraries), ``pipeline`` and ``entry_points``
    (Vulkan), ``launch_target`` (CUDA); anything else is the base's.
    """

    def __init__(self, base: Any, routes: Mapping[int, tuple[Any, int]]):
        self.base = base
        self.routes = dict(routes)

    @property
    def exports(self) -> list[Any]:
        out = list(self.base.exports)
        for ordinal, (impl, k) in self.routes.items():
            out[ordinal] = impl.exports[k]
        return out

    def dispatch(self, ordinal: int, *args: Any, **kwargs: Any) -> None:
        route = self.routes.get(ordinal)
        if route is None:
            return self.base.dispatch(ordinal, *args, **kwargs)
        impl, k = route
        return impl.dispatch(k, *args, **kwargs)

    def pipeline(self, ordinal: int) -> Any:
        route = self.routes.get(ordinal)
        if route is None:
            return self.base.pipeline(ordinal)
        impl, k = route
        return impl.pipeline(k)

    def launch_target(self, ordinal: int) -> Any:
        route = self.routes.get(ordinal)
        if route is None:
            return self.base.launch_target(ordinal)
        impl, k = route
        return impl.launch_target(k)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def swap(
    executable: HalExecutable, replacement: HalExecutable, exports: tuple[str, ...] | None = None
) -> None:
    """Make ``executable`` run ``replacement``: whole (``exports`` None) or only the named exports.

    The first swap remembers the original so ``revert`` restores it; a later swap replaces an earlier one.
    """
    reg = registry(executable.device)
    original_impl, original_names = reg.originals.setdefault(
        id(executable), (executable.impl, executable.export_names)
    )
    if exports is None:
        executable.impl = replacement.impl
        executable.export_names = replacement.export_names
        return
    base = executable.impl if isinstance(executable.impl, ExportOverlay) else original_impl
    routes = dict(base.routes) if isinstance(base, ExportOverlay) else {}
    if isinstance(base, ExportOverlay):
        base = base.base
    for name in exports:
        routes[original_names.index(name)] = (replacement.impl, replacement.export_names.index(name))
    executable.impl = ExportOverlay(base, routes)
    executable.export_names = original_names


def revert(executable: HalExecutable) -> bool:
    """Give ``executable`` its original code back; False when it was not swapped."""
    reg = registry(executable.device)
    original = reg.originals.pop(id(executable), None)
    if original is None:
        return False
    executable.impl, executable.export_names = original
    return True

