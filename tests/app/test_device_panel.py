"""The Device panel in the real main window: the CPU and every Vulkan device are offered, the selected
device's properties and limits equal what the engine reads from Vulkan itself, the choice persists, and
without Vulkan the panel names the packages while the CPU stays usable. Rendered to a PNG for review."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from PySide6.QtCore import Qt

from engine.runtime.hal.vulkan.loader import list_physical_devices, vulkan_available

_NO_VULKAN = vulkan_available()


def _rows(panel) -> dict[str, str]:
    t = panel.table
    return {t.item(r, 0).text(): t.item(r, 1).text() for r in range(t.rowCount())}


def _wait_listed(qtbot, panel) -> None:
    qtbot.waitUntil(lambda: panel.listed, timeout=20000)


def test_device_panel_is_a_registered_dock(main_window):
    from app.panels import PANELS
    from app.views.device_panel import DevicePanel

    assert "device" in [s.id for s in PANELS]
    assert isinstance(main_window.panels["device"], DevicePanel)
    assert main_window.findChild(type(main_window.docks["device"]), "dock-device") is not None


def test_cpu_is_offered_first_and_described(qtbot, main_window):
    panel = main_window.panels["device"]
    _wait_listed(qtbot, panel)
    assert panel.combo.itemData(0) == "local-sync"
    assert panel.device_uri == "local-sync"
    rows = _rows(panel)
    assert rows["URI"] == "local-sync"
    assert "embedded-elf" in rows["Executable formats"] and "vmvx-bytecode-fb" in rows["Executable formats"]


@pytest.mark.vulkan
@pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")
def test_vulkan_devices_listed_with_their_limits(qtbot, main_window, tmp_path):
    from app.views.device_panel import selected_device_uri

    panel = main_window.panels["device"]
    _wait_listed(qtbot, panel)
    expected = list_physical_devices()  # read again, independently of the panel's worker
    uris = [panel.combo.itemData(i) for i in range(panel.combo.count())]
    assert uris == ["local-sync", *[f"vulkan://{d.index}" for d in expected]]
    info = expected[0]
    with qtbot.waitSignal(panel.deviceChanged, timeout=5000) as changed:
        assert panel.select("vulkan://0")
    assert changed.args == ["vulkan://0"]
    rows = _rows(panel)
    assert rows["Name"] == info.name
    assert rows["Type"] == info.device_type
    assert rows["Vulkan API"] == info.api_version
    assert rows["Max workgroup count"] == "x".join(str(v) for v in info.max_compute_workgroup_count)
    assert rows["Max workgroup invocations"] == str(info.max_compute_workgroup_invocations)
    assert rows["Min storage buffer offset alignment"] == str(info.min_storage_buffer_offset_alignment)
    assert rows["Extensions"] == str(len(info.extensions))
    assert selected_device_uri() == "vulkan://0"
    # A narrow property column cuts names in their middle (three rows read "Max ..." cut at the end).
    assert panel.table.textElideMode() == Qt.TextElideMode.ElideMiddle
    assert all(panel.table.item(r, 0).toolTip() == panel.table.item(r, 0).text() for r in range(panel.table.rowCount()))

    # Look at it: the panel rendered offscreen (reviewed by eye; kept next to the test's tmp files).
    out = os.environ.get("LENS_DEVICE_PANEL_PNG") or str(tmp_path / "device_panel.png")
    panel.resize(460, 560)
    assert panel.grab().save(out)


@pytest.mark.vulkan
@pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")
def test_choice_persists_into_the_next_window(qtbot, make_main_window):
    first = make_main_window()
    panel = first.panels["device"]
    _wait_listed(qtbot, panel)
    assert panel.select("vulkan://0")
    first.close()
    second = make_main_window()
    panel = second.panels["device"]
    _wait_listed(qtbot, panel)
    assert panel.device_uri == "vulkan://0"
    assert _rows(panel)["URI"] == "vulkan://0"


_NO_VULKAN_SCRIPT = r"""
import sys
from PySide6.QtWidgets import QApplication
from app.main_window import MainWindow
app = QApplication([])
window = MainWindow()
panel = window.panels["device"]
while not panel.listed:
    app.processEvents()
print("COMBO", [panel.combo.itemData(i) for i in range(panel.combo.count())])
print("STATUS", panel.status.text())
window.close()
window.worker.shutdown() if hasattr(window, "worker") else None
"""


def test_without_vulkan_the_panel_names_the_packages(tmp_path):
    env = {
        **os.environ,
        "VK_ICD_FILENAMES": "/nonexistent",
        "VK_DRIVER_FILES": "/nonexistent",
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CONFIG_HOME": str(tmp_path),
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _NO_VULKAN_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "COMBO ['local-sync']" in proc.stdout
    assert "mesa-vulkan-drivers" in proc.stdout and "libvulkan1" in proc.stdout
