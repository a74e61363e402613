"""Checkpoints are composed of what the VM and HAL objects offer (``checkpoint``/``restore_checkpoint``/
``checkpoint_refs``), never read by reflection; a ref that offers nothing is refused, not left out."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import engine.runtime.hal
import engine.runtime.vm
from engine.runtime.hal.buffers import Allocation, HalBuffer, HalBufferView
from engine.runtime.hal.device import Device
from engine.runtime.hal.sync import HalFence, HalSemaphore
from engine.runtime.vm.interpreter import Interpreter
from engine.runtime.vm.values import Checkpointable, VmList
from engine.timetravel.snapshot import ArrayStore, restore_snapshot, take_snapshot

ROOT = Path(__file__).resolve().parents[1]


def _ref_classes() -> list[type]:
    found = []
    for package in (engine.runtime.vm, engine.runtime.hal):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".vulkan." in info.name + ".":
                continue  # the raw Vulkan layer holds no VM refs (and needs the loader)
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__ and isinstance(getattr(cls, "vm_type_name", None), str):
                    found.append(cls)
    return found


def test_every_ref_class_of_the_vm_and_the_hal_can_be_checkpointed():
    classes = _ref_classes()
    names = {c.vm_type_name for c in classes}
    assert {"vm.buffer", "vm.list", "hal.buffer", "hal.buffer_view", "hal.fence", "hal.device"} <= names
    for cls in classes:
        for method in ("checkpoint", "restore_checkpoint", "checkpoint_refs"):
            assert callable(getattr(cls, method, None)), f"{cls.__name__} lacks {method}"


def test_time_travel_reads_no_object_by_reflection():
    banned_calls = {"vars", "setattr", "deepcopy"}
    for path in sorted((ROOT / "engine" / "timetravel").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("__dict__", "__slots__", "__setattr__"), (path.name, node.lineno)
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                assert name not in banned_calls, (path.name, node.lineno, name)


def test_a_checkpoint_restores_refs_in_place():
    device = Device("test")
    allocation = Allocation(np.arange(256, dtype=np.uint8).copy(), device, "allocate")
    buffer = HalBuffer(allocation, 16, 64, 0, 0)
    view = HalBufferView(buffer, (4, 4), 0)
    semaphore = HalSemaphore(0)
    fence = HalFence([(semaphore, 1)])
    items = VmList("!vm.opaque", [view, fence])
    interpreter = Interpreter()
    interpreter.results = [items]
    snap = take_snapshot(interpreter, [], [device], 0, ArrayStore())
    saved = {id(obj) for obj, _ in snap.objects}
    assert {id(x) for x in (device, allocation, buffer, view, semaphore, fence, items)} <= saved
    assert all(isinstance(obj, Checkpointable) for obj, _ in snap.objects)

    allocation.data[:] = 7
    semaphore.signal(5)
    items.items.append(None)
    interpreter.results = None
    restore_snapshot(snap, interpreter)
    assert interpreter.results == [items] and interpreter.results[0] is items
    assert items.items == [view, fence]
    assert semaphore.value == 0
    assert np.array_equal(allocation.data, np.arange(256, dtype=np.uint8))


def test_a_ref_that_offers_no_checkpoint_is_refused():
    class Foreign:
        vm_type_name = "custom.thing"

    interpreter = Interpreter()
    interpreter.results = [Foreign()]
    with pytest.raises(TypeError, match="Foreign"):
        take_snapshot(interpreter, [], [], 0, ArrayStore())
