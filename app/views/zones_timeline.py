"""The zones timeline: one culling graphics item paints a trace's zones, a row per track and depth.

The item asks ``engine.trace.query.ZoneIndex`` for the boxes of the visible time range at the current
resolution (ns per pixel), so a paint costs what is visible, never what the trace holds; runs of
sub-pixel zones come back merged and are drawn hatched grey. Navigation follows Tracy: the wheel zooms
at the cursor, a left drag pans, W/S zoom in/out, A/D pan left/right. Hover shows a zone's name, time and
arguments; a click selects it (``zoneSelected`` with an ``engine.trace.model.ZoneInfo``).
"""

from __future__ import annotations

import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPainter, QPen, QStaticText
from PySide6.QtWidgets import QToolTip

from engine.trace.model import Trace, Track, ZoneInfo
from engine.trace.query import ZoneIndex

_PALETTE = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6", "#d4a6c8", "#8cd17d",
]  # fmt: skip
ROW_HEIGHT = 0.85
TRACK_GAP = 0.6
LABEL_CHARS = 28  # a track name on the left axis, per line


def format_ns(ns: float) -> str:
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


class TrackRows:
    """Where each (track, depth) is drawn: ``row_of(track, depth)``; tracks stacked with a gap."""

    def __init__(self, trace: Trace) -> None:
        z = trace.zones
        n_tracks = len(trace.tracks)
        depth_count = np.zeros(max(n_tracks, 1), np.int64)
        if len(z.lane_track):
            np.maximum.at(depth_count, z.lane_track.astype(np.int64), z.lane_depth.astype(np.int64) + 1)
        has_instants = np.zeros(max(n_tracks, 1), bool)
        has_instants[np.unique(trace.instants.track)] = True
        depth_count = np.maximum(depth_count, has_instants.astype(np.int64))
        shown = depth_count > 0
        self.offset = np.zeros(max(n_tracks, 1), np.float64)
        y = 0.0
        for t in range(n_tracks):  # one iteration per track
            self.offset[t] = y
            if shown[t]:
                y += depth_count[t] + TRACK_GAP
        self.depth_count = depth_count
        self.shown = shown
        self.height = max(y, 1.0)

    def rows(self, track: np.ndarray, depth: np.ndarray) -> np.ndarray:
        return self.offset[track.astype(np.int64)] + depth

    def at(self, y: float) -> tuple[int, int] | None:
        """(track, depth) under the row coordinate ``y``."""
        for t in np.flatnonzero(self.shown).tolist():
            d = y - self.offset[t]
            if 0 <= d < self.depth_count[t] and (d - np.floor(d)) <= ROW_HEIGHT:
                return t, int(np.floor(d))
        return None


class ZoneTimelineItem(pg.GraphicsObject):
    """Paints one trace; x is nanoseconds since the trace's first event, y the row."""

    zoneClicked = Signal(object)  # ZoneInfo

    def __init__(self, trace: Trace, index: ZoneIndex | None = None):
        super().__init__()
        self.trace = trace
        self.index = index or ZoneIndex(trace)
        self.rows = TrackRows(trace)
        self.origin = trace.span[0]
        self.span = max(trace.span[1] - self.origin, 1)
        self.selected: int | None = None
        self.highlight_name: int | None = None
        self.highlight_names: tuple[int, ...] = ()  # several names at once: a source line's dispatches
        self.painted_count = 0  # boxes drawn by the last paint (tests check the culling on it)
        self.merged_count = 0
        self.last_paint_ms = 0.0  # how long the last paint took (the redraw benchmark reads it)
        self._label_cache: dict[str, QStaticText] = {}
        self.setAcceptHoverEvents(True)
        # ARGB words per palette entry (index -1, the last, is the merged-run grey) and their edge shade.
        self._colors = np.asarray(
            [QColor(c).rgba() for c in _PALETTE] + [QColor("#b4b4b4").rgba()], np.uint32
        )
        self._edge_colors = np.asarray(
            [QColor(c).darker(140).rgba() for c in _PALETTE] + [QColor("#b4b4b4").rgba()], np.uint32
        )

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(0, 0, float(self.span), self.rows.height)

    def visible_range(self) -> tuple[int, int, int] | None:
        """(t0, t1, ns per pixel) of what the view shows now, in trace time."""
        vb = self.getViewBox()
        if vb is None:
            return None
        (x0, x1), _ = vb.viewRange()
        width = max(vb.width(), 1.0)
        res = max(int((x1 - x0) / width), 1)
        return int(np.floor(x0)) + self.origin, int(np.ceil(x1)) + self.origin, res

    def paint(self, p: QPainter, *args) -> None:
        started = time.perf_counter()
        try:
            self._paint(p)
        finally:
            self.last_paint_ms = (time.perf_counter() - started) * 1e3

    def _paint(self, p: QPainter) -> None:
        vr = self.visible_range()
        if vr is None:
            return
        t0, t1, res = vr
        boxes = self.index.visible(t0, t1, res)
        tr = p.transform()
        sx, dx, sy, dy = tr.m11(), tr.dx(), tr.m22(), tr.dy()
        p.save()
        p.resetTransform()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        n = len(boxes)
        if n:
            x0 = dx + sx * (boxes.start - self.origin).astype(np.float64)
            x1 = dx + sx * (boxes.end - self.origin).astype(np.float64)
            x1 = np.maximum(x1, x0 + 1.0)  # at least a pixel wide
            x0 = np.maximum(x0, -2.0)  # long zones: keep numbers small for Qt
            x1 = np.minimum(x1, dx + sx * self.span + 2.0)
            rows = self.rows.rows(boxes.track, boxes.depth)
            y0 = dy + sy * rows
            h = sy * ROW_HEIGHT
            merged = boxes.count > 1
            names = self.trace.zones.name[boxes.index]
            color = np.where(merged, -1, names % len(_PALETTE))
            (vx0, vx1), _ = self.getViewBox().viewRange()
            self._paint_raster(p, x0, x1, y0, h, color, dx + sx * vx0, dx + sx * vx1)
            self._paint_labels(p, x0, x1, y0, h, boxes, merged, dx + sx * vx0)
            self._paint_marks(p, x0, x1, y0, h, boxes, names)
            self.merged_count = int(merged.sum())
        else:
            self.merged_count = 0
        self._paint_instants(p, t0, t1, sx, dx, sy, dy)
        p.restore()
        self.painted_count = n

    def _paint_raster(self, p, x0, x1, y0, h, color, left, right) -> None:
        """Fill the boxes: one scanline of colours per visible lane, all lanes found by a single
        ``searchsorted`` and drawn from one image (a row per lane) stretched to each lane's height.

        The boxes of one lane are contiguous, sorted and (for nested traces) disjoint, so pixel ``x``
        shows the last box starting at or before it, if that box reaches past ``x``. Keys ``lane * W + x``
        make every lane one sorted run, so no Python loop touches boxes or pixels; the per-lane work left
        is one ``drawImage``. A box's first pixel is darkened so neighbours stay apart.
        """
        ix0 = int(np.floor(min(left, right)))
        width = int(np.ceil(abs(right - left))) + 1
        n = len(y0)
        if width <= 0 or width > 16384 or n == 0:
            return
        lane_start = np.empty(n, bool)
        lane_start[0] = True
        np.not_equal(y0[1:], y0[:-1], out=lane_start[1:])
        lane = np.cumsum(lane_start) - 1  # lane number of each box, 0..L-1
        firsts = np.flatnonzero(lane_start)
        n_lanes = firsts.shape[0]
        stride = float(width + 8)
        # Box starts in scanline pixels, clamped into [-2, width + 2] so lanes never reach into each other.
        bx0 = np.clip(x0 - ix0, -2.0, width + 2.0)
        bx1 = np.clip(x1 - ix0, -2.0, width + 2.0)
        keys = lane * stride + bx0
        px = (np.arange(n_lanes, dtype=np.float64)[:, None] * stride + (np.arange(width) + 0.5)[None, :]).ravel()
        j = np.searchsorted(keys, px, side="right") - 1
        jj = np.maximum(j, 0)
        pixel_lane = np.repeat(np.arange(n_lanes), width)
        covered = (j >= 0) & (lane[jj] == pixel_lane) & ((px - pixel_lane * stride) < bx1[jj])
        c = color[jj]
        lines = np.where(covered, self._colors[c], 0).astype(np.uint32)
        first = np.floor(bx0).astype(np.int64)
        wide = (x1 - x0 > 4) & (first >= 0) & (first < width)
        lines[lane[wide] * width + first[wide]] = self._edge_colors[color[wide]]
        if np.any(color < 0):  # merged runs: a two-pixel hatch
            hatch = np.tile((np.arange(width) // 2) % 2 == 0, n_lanes)
            lines[covered & (c < 0) & hatch] = 0xFF8A8A8A
        image = QImage(lines.data, width, n_lanes, width * 4, QImage.Format.Format_ARGB32_Premultiplied)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        for k, a in enumerate(firsts.tolist()):  # one draw per visible lane
            p.drawImage(QRectF(ix0, float(y0[a]), width, h), image, QRectF(0, k, width, 1))
        del lines  # the image borrowed its memory until the draws above

    def _paint_labels(self, p, x0, x1, y0, h, boxes, merged, view_left: float) -> None:
        """Names on boxes wide enough to read (at most 300, widest first). Labels are the zone's name
        cut to fit, as cached ``QStaticText`` (laid out once); durations are in the tooltip."""
        wide = np.flatnonzero((x1 - x0) > 40)
        if wide.shape[0] > 300:
            wide = wide[np.argsort(x0[wide] - x1[wide])[:300]]
        fm = QFontMetrics(p.font())
        text_top = (h - fm.height()) / 2
        p.setPen(QPen(QColor("#111111")))
        names = self.trace.names.strings
        cache = self._label_cache
        if len(cache) > 20_000:
            cache.clear()
        for j in wide.tolist():
            left = max(float(x0[j]), view_left)  # a zone that began off-screen keeps its label visible
            width = float(x1[j]) - left
            if width < 30:
                continue
            if merged[j]:
                label = f"{int(boxes.count[j])} zones"
            else:
                label = names[int(self.trace.zones.name[int(boxes.index[j])])]
            text = label_in_box(fm, label, width)
            static = cache.get(text)
            if static is None:
                static = cache[text] = QStaticText(text)
                static.setTextFormat(Qt.TextFormat.PlainText)
            p.drawStaticText(QPointF(left + 3, float(y0[j]) + text_top), static)

    def _paint_marks(self, p, x0, x1, y0, h, boxes, names) -> None:
        marks = np.zeros(len(boxes), bool)
        if self.highlight_name is not None:
            marks |= (names == self.highlight_name) & (boxes.count == 1)
        if self.highlight_names:
            marks |= np.isin(names, self.highlight_names) & (boxes.count == 1)
        p.setBrush(Qt.BrushStyle.NoBrush)
        if marks.any():
            p.setPen(QPen(QColor("#ffcc00"), 2))
            for j in np.flatnonzero(marks)[:2000].tolist():
                p.drawRect(QRectF(float(x0[j]), float(y0[j]), float(x1[j] - x0[j]), h))
        if self.selected is not None:
            hit = np.flatnonzero(boxes.index == self.selected)
            p.setPen(QPen(QColor("black"), 2))
            for j in hit.tolist():
                p.drawRect(QRectF(float(x0[j]), float(y0[j]), float(x1[j] - x0[j]), h))

    def _paint_instants(self, p, t0, t1, sx, dx, sy, dy) -> None:
        ins = self.trace.instants
        if not len(ins.time):
            return
        sel = np.flatnonzero((ins.time >= t0) & (ins.time <= t1))[:5000]
        if not sel.shape[0]:
            return
        p.setPen(QPen(QColor("#c0392b"), 1))
        xs = dx + sx * (ins.time[sel] - self.origin).astype(np.float64)
        ys = dy + sy * self.rows.offset[ins.track[sel].astype(np.int64)]
        for x, y in zip(xs.tolist(), ys.tolist()):
            p.drawLine(QPointF(x, y), QPointF(x, y + sy * ROW_HEIGHT))

    # -- interaction -------------------------------------------------------------------------------------

    def zone_at(self, pos: QPointF) -> int | None:
        """The zone under an item-coordinate point (x ns since origin, y row)."""
        hit = self.rows.at(pos.y())
        if hit is None:
            return None
        track, depth = hit
        return self.index.zone_at(track, depth, int(pos.x()) + self.origin)

    def describe(self, i: int) -> str:
        z = self.trace.zone(i)
        lines = [
            f"{z.name}  {format_ns(z.duration_ns)}",
            f"{z.track} · depth {z.depth} · at {format_ns(z.start_ns - self.origin)}",
        ]
        if z.category:
            lines.append(f"category {z.category}")
        for k, v in list(z.args.items())[:8]:
            lines.append(f"{k}: {v}")
        return "\n".join(lines)

    def hoverEvent(self, ev) -> None:  # noqa: N802
        if ev.isExit():
            QToolTip.hideText()
            return
        i = self.zone_at(ev.pos())
        self.setToolTip(self.describe(i) if i is not None else "")

    def mouseClickEvent(self, ev) -> None:  # noqa: N802
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        i = self.zone_at(ev.pos())
        if i is None:
            return
        ev.accept()
        self.select(i)

    def select(self, i: int | None) -> ZoneInfo | None:
        self.selected = i
        self.update()
        if i is None:
            return None
        info = self.trace.zone(i)
        self.zoneClicked.emit(info)
        return info


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def label_in_box(metrics: QFontMetrics, label: str, box_width: float) -> str:
    """``label`` elided to the width of its box less a 3-px margin each side, by the font's own advances (a
    count of average-width characters let capitals and wide letters run into the next zone's label)."""
    return metrics.elidedText(label, Qt.TextElideMode.ElideRight, max(int(box_width) - 6, 0))


def track_label(trace: Trace, track: Track) -> str:
    """A track's name on the timeline's left axis. IREE's HAL profile names a track by physical device and queue
    ordinals (``host execution, queue[0]`` of ``device[0]``) and records no device name: the HAL device is the
    one the profile was taken on (``metadata["device"]``, e.g. ``local-sync``), or the label says it is not
    known. A name longer than the axis is elided, never cut mid-word without a mark."""
    if trace.metadata.get("kind") != "ireeprof" or not track.group:
        return _short(track.name)
    device = trace.metadata.get("device")
    where = f"{device} {track.group}" if device else f"{track.group}, device not named"
    return f"{_short(track.name)}\n{_short(where)}"


class ZoneTimeline(pg.PlotWidget):
    """A plot holding one ``ZoneTimelineItem``, with Tracy's keys and track names on the left axis."""

    zoneSelected = Signal(object)  # ZoneInfo

    def __init__(self, parent=None):
        super().__init__(parent, background="w")
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setLabel("bottom", "time", units="s")
        vb = self.getViewBox()
        vb.invertY(True)
        vb.setMouseEnabled(x=True, y=False)
        self.item: ZoneTimelineItem | None = None
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        # The bottom axis shows seconds; the item's x is nanoseconds.
        self.getPlotItem().getAxis("bottom").setScale(1e-9)

    def set_trace(self, trace: Trace | None, index: ZoneIndex | None = None) -> None:
        if self.item is not None:
            self.removeItem(self.item)
            self.item = None
        if trace is None:
            return
        self.item = ZoneTimelineItem(trace, index)
        self.item.zoneClicked.connect(self.zoneSelected)
        self.addItem(self.item)
        rows = self.item.rows
        ticks = [
            (float(rows.offset[t.id]) + ROW_HEIGHT / 2, track_label(trace, t))
            for t in trace.tracks
            if t.id < len(rows.shown) and rows.shown[t.id]
        ]
        self.getPlotItem().getAxis("left").setTicks([ticks, []])
        vb = self.getViewBox()
        span = float(self.item.span)
        vb.setLimits(xMin=-span * 0.05, xMax=span * 1.05, minXRange=10.0, yMin=-0.5, yMax=rows.height + 0.5)
        self.zoom_all()

    def zoom_all(self) -> None:
        if self.item is not None:
            self.getViewBox().setRange(
                xRange=(0, float(self.item.span)), yRange=(0, self.item.rows.height), padding=0.01
            )

    def x_range(self) -> tuple[float, float]:
        return tuple(self.getViewBox().viewRange()[0])  # type: ignore[return-value]

    def zoom(self, factor: float, center: float | None = None) -> None:
        """Zoom the time axis by ``factor`` (< 1 zooms in) around ``center`` (ns; default the middle)."""
        x0, x1 = self.x_range()
        c = (x0 + x1) / 2 if center is None else center
        self.getViewBox().setXRange(c - (c - x0) * factor, c + (x1 - c) * factor, padding=0)

    def pan(self, fraction: float) -> None:
        x0, x1 = self.x_range()
        d = (x1 - x0) * fraction
        self.getViewBox().setXRange(x0 + d, x1 + d, padding=0)

    def show_zone(self, i: int) -> None:
        """Zoom so zone ``i`` fills most of the view, and select it."""
        if self.item is None:
            return
        z = self.item.trace.zones
        s, e = int(z.start[i]) - self.item.origin, int(z.end[i]) - self.item.origin
        pad = max((e - s) * 0.25, 50)
        self.getViewBox().setXRange(s - pad, e + pad, padding=0)
        self.item.select(i)

    def keyPressEvent(self, ev) -> None:  # noqa: N802
        key = ev.key()
        if key == Qt.Key.Key_W:
            self.zoom(0.8)
        elif key == Qt.Key.Key_S:
            self.zoom(1.25)
        elif key == Qt.Key.Key_A:
            self.pan(-0.1)
        elif key == Qt.Key.Key_D:
            self.pan(0.1)
        elif key == Qt.Key.Key_Home:
            self.zoom_all()
        else:
            super().keyPressEvent(ev)
            return
        ev.accept()
