"""The Device panel: which device a debug run uses (the CPU or one of the Vulkan devices) and what that
device is (properties and compute limits, as ``iree-lens devices`` prints them).

The choice is the device URI of ``engine.runtime.hal.devices.create_device`` (``local-sync``,
``vulkan://N``); it is remembered in the settings (``run/device``), read back with
:func:`selected_device_uri`, and announced by ``DevicePanel.deviceChanged``. Vulkan devices are listed on
the engine worker (creating a Vulkan instance can take a moment); without Vulkan the panel says why and
which packages to install, and the CPU stays selectable.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.panels import PanelServices
from app.settings import open_settings
from engine.runtime.hal.devices import DeviceChoice, cpu_choice, cuda_absence, hip_absence, list_devices

SETTINGS_KEY = "run/device"
CPU_URI = "local-sync"


def selected_device_uri() -> str:
    """The device the user chose for runs (``local-sync`` until a choice is made)."""
    value = open_settings().value(SETTINGS_KEY, CPU_URI)
    return str(value) if value else CPU_URI


class DevicePanel(QWidget):
    deviceChanged = Signal(str)  # the device URI now selected
    devicesListed = Signal()  # the Vulkan listing arrived (with devices or with the reason there are none)

    def __init__(self, services: PanelServices, parent: QWidget | None = None):
        super().__init__(parent)
        self.services = services
        self.choices: dict[str, DeviceChoice] = {CPU_URI: cpu_choice()}
        self.vulkan_devices: list[DeviceChoice] = []
        self.cuda_devices: list[DeviceChoice] = []
        self.cuda_missing: str | None = None  # why no CUDA device is listed, once checked
        self.hip_devices: list[DeviceChoice] = []
        self.hip_missing: str | None = None  # why no HIP device is listed, once checked
        self.vulkan_missing: str | None = None
        self.listed = False

        self.combo = QComboBox(self)
        self.combo.setObjectName("deviceCombo")
        self.combo.setToolTip("The device the debug engine (and the reference engine) runs programs on")
        self.combo.addItem(self.choices[CPU_URI].name, CPU_URI)
        self.status = QLabel("Looking for Vulkan devices…", self)
        self.status.setObjectName("deviceStatus")
        self.status.setWordWrap(True)
        self.cuda_status = QLabel("", self)
        self.cuda_status.setObjectName("cudaStatus")
        self.cuda_status.setWordWrap(True)
        self.cuda_status.setVisible(False)
        self.hip_status = QLabel("", self)
        self.hip_status.setObjectName("hipStatus")
        self.hip_status.setWordWrap(True)
        self.hip_status.setVisible(False)
        self.table = QTableWidget(0, 2, self)
        self.table.setObjectName("deviceProperties")
        self.table.setHorizontalHeaderLabels(["Property", "Value"])
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)  # compact rows
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # Cut in the middle: "Max workgroup count" and "Max workgroup size" both read "Max ..." cut at the end.
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # Property names fit their column up to half the table; the values get the rest (a narrow dock at
        # 1366x768 would otherwise push the Value column out of sight).
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)

        form = QFormLayout()
        form.addRow("Run on:", self.combo)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(self.cuda_status)
        layout.addWidget(self.hip_status)
        layout.addWidget(self.table, 1)

        self._show(CPU_URI)
        self.combo.currentIndexChanged.connect(self._on_choice)
        workbench = getattr(services, "workbench", None)
        if workbench is not None:  # the window's state follows this choice, and this follows the state
            workbench.deviceChanged.connect(self.select)
        services.worker.submit(
            list_devices,
            tag="device-panel-list",
            on_result=self._on_listed,
            on_error=lambda error: self._on_listed(([], str(getattr(error, "message", error)))),
        )
        services.worker.submit(cuda_absence, tag="device-panel-cuda", on_result=self._on_cuda_checked)
        services.worker.submit(hip_absence, tag="device-panel-hip", on_result=self._on_hip_checked)

    def sizeHint(self) -> QSize:
        return QSize(380, 420)

    @property
    def device_uri(self) -> str:
        return str(self.combo.currentData())

    def select(self, uri: str) -> bool:
        """Select the device with ``uri``; False when it is not listed."""
        index = self.combo.findData(uri)
        if index < 0:
            return False
        self.combo.setCurrentIndex(index)
        return True

    def _on_listed(self, listed: tuple[list[DeviceChoice], str | None]) -> None:
        choices, self.vulkan_missing = listed
        self.vulkan_devices = [c for c in choices if c.kind == "vulkan"]
        self.cuda_devices = [c for c in choices if c.kind == "cuda"]
        self.hip_devices = [c for c in choices if c.kind == "hip"]
        for choice in self.vulkan_devices + self.cuda_devices + self.hip_devices:
            self.choices[choice.uri] = choice
            self.combo.addItem(choice.name, choice.uri)
        if self.vulkan_missing:
            self.status.setText(f"Vulkan is not available: {self.vulkan_missing}")
        else:
            n = len(self.vulkan_devices)
            self.status.setText(f"{n} Vulkan device{'s' if n != 1 else ''} found.")
        if self.cuda_devices:
            n = len(self.cuda_devices)
            self.status.setText(f"{self.status.text()} {n} CUDA device{'s' if n != 1 else ''} found.")
        if self.hip_devices:
            n = len(self.hip_devices)
            self.status.setText(f"{self.status.text()} {n} HIP device{'s' if n != 1 else ''} found.")
        self.listed = True
        workbench = getattr(self.services, "workbench", None)
        wanted = workbench.device if workbench is not None else selected_device_uri()
        if wanted != self.device_uri and not self.select(wanted):
            self._show(self.device_uri)
        self.devicesListed.emit()

    def _on_cuda_checked(self, absence: str | None) -> None:
        """Say why no CUDA device is listed (no driver here), under the Vulkan status."""
        self.cuda_missing = absence
        self._say_missing(self.cuda_status, "CUDA", absence)

    def _on_hip_checked(self, absence: str | None) -> None:
        """Say why no HIP device is listed (no ROCm here), under the CUDA status."""
        self.hip_missing = absence
        self._say_missing(self.hip_status, "HIP", absence)

    @staticmethod
    def _say_missing(label: QLabel, what: str, absence: str | None) -> None:
        """The reason's first clause (what is missing); the whole sentence, with what to do instead, is the
        tooltip and what the mismatch bar says when a build for that device is opened."""
        label.setText(f"{what} is not available: {absence.split(';')[0]}." if absence else "")
        label.setToolTip(f"{what} is not available: {absence}" if absence else "")
        label.setVisible(bool(absence))

    def _on_choice(self, _index: int) -> None:
        uri = self.device_uri
        self._show(uri)
        if self.listed:  # the saved choice is restored once the list is complete, not overwritten before
            open_settings().setValue(SETTINGS_KEY, uri)
            workbench = getattr(self.services, "workbench", None)
            if workbench is not None:
                workbench.set_device(uri)
        self.deviceChanged.emit(uri)

    def properties_of(self, uri: str) -> list[tuple[str, str]]:
        choice = self.choices.get(uri)
        return choice.properties if choice is not None else [("URI", uri), ("Status", "not listed")]

    def _show(self, uri: str) -> None:
        rows = self.properties_of(uri)
        self.table.setRowCount(len(rows))
        for r, (label, text) in enumerate(rows):
            name = QTableWidgetItem(label)
            name.setToolTip(label)
            self.table.setItem(r, 0, name)
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            self.table.setItem(r, 1, item)
        self._fit_property_column()

    def _fit_property_column(self) -> None:
        self.table.resizeColumnToContents(0)
        half = max(self.table.viewport().width() // 2, 60)
        if self.table.columnWidth(0) > half:
            self.table.setColumnWidth(0, half)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._fit_property_column()
