"""Charts drawn on the server as inline SVG (no script, no CDN, no build step).

Every mark carries its number (``data-value``) and a ``<title>`` a screen reader and a
hover can read; colours come from CSS classes, so the page's light or dark scheme
applies. The figures are the ones ``/api/...`` returns: the templates pass the same lists.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

W, H = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 10, 22


def _num(value: float) -> str:
    return f"{value:.10g}"


def _svg(width: int, height: int, label: str, body: list[str], cls: str) -> Markup:
    return Markup(
        f'<svg class="{cls}" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(label)}">'
        f"<title>{escape(label)}</title>{''.join(body)}</svg>"
    )


def sparkline(values: Sequence[float], label: str, *, cls: str = "spark") -> Markup:
    """A tiny bar strip (one bar per bucket, none for an empty one), 96 by 20."""
    return _sparkline(tuple(values), label, cls)


@functools.lru_cache(maxsize=8192)
def _sparkline(values: tuple[float, ...], label: str, cls: str) -> Markup:
    # memoised: a fleet page draws two per persona, and most do not change between loads
    width, height = 96, 20
    top = max(values, default=0) or 1
    step = width / max(len(values), 1)
    bar = f"{max(step - 1, 1):.2f}"
    marks = [f'<rect class="spark-base" x="0" y="{height - 1}" width="{width}" height="1"/>']
    for i, v in enumerate(values):
        if v > 0:
            h = max(1.5, v / top * (height - 2))
            marks.append(
                f'<rect x="{i * step:.2f}" y="{height - h:.2f}" width="{bar}" height="{h:.2f}" '
                f'data-index="{i}" data-value="{_num(v)}"/>'
            )
    return Markup(
        f'<svg class="{cls}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f"{''.join(marks)}</svg>"
    )


def _axis(top: float, labels: Sequence[str], fmt: str = "{:g}") -> list[str]:
    out = []
    for frac in (0, 0.5, 1):
        y = TOP + (H - TOP - BOTTOM) * (1 - frac)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(fmt.format(top * frac))}</text>"
        )
    n = len(labels)
    step = (W - LEFT - RIGHT) / max(n, 1)
    every = max(1, n // 6)
    for i, text in enumerate(labels):
        if i % every == 0:
            x = LEFT + step * (i + 0.5)
            out.append(
                f'<text class="tick" x="{x:.1f}" y="{H - 6}" text-anchor="middle">'
                f"{escape(text)}</text>"
            )
    return out


def _y(value: float, top: float) -> float:
    return TOP + (H - TOP - BOTTOM) * (1 - (value / top if top else 0))


def stacked_bars(
    labels: Sequence[str], series: Mapping[str, Sequence[float]], label: str
) -> Markup:
    """Bars per bucket stacked by series (runs by outcome); one ``rect`` per non-zero part."""
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    top = max(math.ceil(max(totals, default=0)), 2)
    top += top % 2  # counts: the middle grid line falls on a whole number
    step = (W - LEFT - RIGHT) / max(len(labels), 1)
    body = _axis(top, labels, "{:.0f}")
    for i, bucket in enumerate(labels):
        base = 0.0
        for name, values in series.items():
            v = values[i]
            if v <= 0:
                continue
            y0, y1 = _y(base, top), _y(base + v, top)
            body.append(
                f'<rect class="s-{escape(name)}" x="{LEFT + step * i + 1:.1f}" y="{y1:.1f}" '
                f'width="{max(step - 2, 1):.1f}" height="{y0 - y1:.1f}" data-series="'
                f'{escape(name)}" data-index="{i}" data-value="{_num(v)}">'
                f"<title>{escape(bucket)}: {_num(v)} {escape(name)}</title></rect>"
            )
            base += v
    return _svg(W, H, label, body, "chart")


def bars_with_cap(
    labels: Sequence[str],
    values: Sequence[float | None],
    label: str,
    *,
    cap: float | None = None,
    cap_label: str = "cap",
    unit: str = "",
    cls: str = "s-spend",
) -> Markup:
    """One bar per bucket (``None``: no data, no bar), a dashed line at ``cap``."""
    present = [v for v in values if v is not None]
    top = max(max(present, default=0), cap or 0) or 1
    top *= 1.1
    step = (W - LEFT - RIGHT) / max(len(labels), 1)
    fmt = unit + "{:.3g}"
    body = _axis(top, labels, fmt)
    for i, (bucket, v) in enumerate(zip(labels, values, strict=True)):
        if v is None:
            continue
        y = _y(v, top)
        body.append(
            f'<rect class="{cls}" x="{LEFT + step * i + 1:.1f}" y="{y:.1f}" '
            f'width="{max(step - 2, 1):.1f}" height="{_y(0, top) - y:.1f}" data-index="{i}" '
            f'data-value="{_num(v)}"><title>{escape(bucket)}: {unit}{_num(v)}</title></rect>'
        )
    if cap is not None:
        y = _y(cap, top)
        body.append(
            f'<line class="cap" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'data-value="{_num(cap)}"><title>{escape(cap_label)}: {unit}{_num(cap)}</title></line>'
            f'<text class="cap-label" x="{W - RIGHT - 2}" y="{y - 3:.1f}" text-anchor="end">'
            f"{escape(cap_label)} {unit}{_num(cap)}</text>"
        )
    return _svg(W, H, label, body, "chart")


def rate_band(
    labels: Sequence[str],
    rates: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    label: str,
    *,
    threshold: float | None = None,
    threshold_label: str = "min_agreement",
) -> Markup:
    """A rate per bucket (points joined by a line) inside its interval band, 0..1."""
    step = (W - LEFT - RIGHT) / max(len(labels), 1)
    body = _axis(1.0, labels, "{:.0%}")
    band_top: list[str] = []
    band_bottom: list[str] = []
    line: list[str] = []
    points: list[str] = []
    for i, (bucket, rate, low, high) in enumerate(zip(labels, rates, lows, highs, strict=True)):
        if rate is None or low is None or high is None:
            continue
        x = LEFT + step * (i + 0.5)
        band_top.append(f"{x:.1f},{_y(high, 1):.1f}")
        band_bottom.append(f"{x:.1f},{_y(low, 1):.1f}")
        line.append(f"{x:.1f},{_y(rate, 1):.1f}")
        points.append(
            f'<circle class="rate" cx="{x:.1f}" cy="{_y(rate, 1):.1f}" r="3.5" data-index="{i}" '
            f'data-value="{_num(rate)}" data-low="{_num(low)}" data-high="{_num(high)}">'
            f"<title>{escape(bucket)}: {rate:.1%} (Wilson 95%: {low:.1%} to {high:.1%})"
            "</title></circle>"
        )
    if band_top:
        body.append(
            f'<polygon class="band" points="{" ".join(band_top + band_bottom[::-1])}"/>'
            f'<polyline class="rate-line" points="{" ".join(line)}"/>'
        )
    body.extend(points)
    if threshold is not None:
        y = _y(threshold, 1)
        body.append(
            f'<line class="cap" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'data-value="{_num(threshold)}"><title>{escape(threshold_label)} '
            f"{threshold:.0%}</title></line>"
            f'<text class="cap-label" x="{W - RIGHT - 2}" y="{y - 3:.1f}" text-anchor="end">'
            f"{escape(threshold_label)} {threshold:.0%}</text>"
        )
    return _svg(W, H, label, body, "chart")


LANE = 22


def _clusters(spans: Sequence[Mapping[str, Any]], total: float) -> list[list[float]]:
    """The busy stretches of a run: spans closer than 5% of the run (or 0.25 s) merge.

    A wait for a person (``kind == "approval"``) is not busy: only its two ends are, so
    the axis can break inside it; the run's start is always on the axis."""
    gap = max(0.25, total * 0.05)
    points: list[tuple[float, float]] = [(0.0, 0.0)]
    for span in spans:
        a = float(span["start"])
        b = max(float(span["end"]), a)
        points.extend([(a, a), (b, b)] if span.get("kind") == "approval" else [(a, b)])
    merged: list[list[float]] = []  # [start, end, how many spans and ends it holds]
    for a, b in sorted(points):
        if merged and a - merged[-1][1] <= gap:
            merged[-1][1] = max(merged[-1][1], b)
            merged[-1][2] += 1
        else:
            merged.append([a, b, 1])
    return merged


def timeline(spans: Sequence[Mapping[str, Any]], duration: float, label: str) -> Markup:
    """A run's spans as bars on a time axis, one lane per span.

    Each span: ``start``/``end`` in seconds from the run's start, ``label``, ``cls`` (the
    colour: the decision), ``key`` (``data-key``: the call id), ``kind``, ``title`` (the
    hover). The axis is broken where nothing happens for long (a run parked on an approval,
    waiting for a person): each busy stretch gets its share of the width, each idle one a
    narrow gap marked with how long it lasted, so calls a few milliseconds apart stay
    visible beside a wait of minutes."""
    width, left, gap_px = 720, 150, 34
    height = TOP + LANE * max(len(spans), 1) + 24
    plot = width - left - 10
    total = duration if duration > 0 else 1.0
    clusters = _clusters(spans, total)
    n = len(clusters)
    # each busy stretch gets width by what happens in it (spans), a lone instant a slot
    point_px = 24.0
    counts = [c[2] if c[1] > c[0] else 0 for c in clusters]
    room = plot - gap_px * (n - 1) - point_px * counts.count(0)
    shares = [room * k / sum(counts) if k else point_px for k in counts]
    if not any(counts):
        shares = [(plot - gap_px * (n - 1)) / n] * n
    origins = []
    x = float(left)
    for share in shares:
        origins.append(x)
        x += share + gap_px

    def at(t: float) -> float:
        for (a, b, _), x0, w in zip(clusters, origins, shares, strict=True):
            if t <= b + 1e-9:
                if t < a:
                    return x0
                return x0 + (w * (t - a) / (b - a) if b > a else w / 2)
        return origins[-1] + shares[-1]

    body: list[str] = []
    placed: dict[str, float] = {"bottom": -1e9, "top": -1e9}  # right edge of the last label

    def put(row: str, x: float, y: float, text: str, anchor: str) -> None:
        # ~7 px a character at this size: a label that would overlap the last is left out
        size = 7.0 * len(text)
        start = x - {"start": 0.0, "middle": size / 2, "end": size}[anchor]
        if start < placed[row] + 4:
            return
        placed[row] = start + size
        body.append(f'<text class="tick" x="{x:.1f}" y="{y}" text-anchor="{anchor}">{text}</text>')

    for index, ((a, b, _), x0, w) in enumerate(zip(clusters, origins, shares, strict=True)):
        for t in (a, b) if b > a else (a,):
            body.append(
                f'<line class="grid" x1="{at(t):.1f}" x2="{at(t):.1f}" y1="{TOP}" '
                f'y2="{height - 20}"/>'
            )
            anchor = "middle" if b == a else "start" if t == a else "end"
            put("bottom", at(t), height - 6, _secs(t), anchor)
        if index + 1 < n:
            idle = clusters[index + 1][0] - b
            gx = x0 + w + gap_px / 2
            body.append(
                f'<line class="gap" x1="{gx:.1f}" x2="{gx:.1f}" y1="{TOP}" y2="{height - 20}">'
                f"<title>nothing for {_secs(idle)}</title></line>"
            )
            put("top", gx, TOP + 10, f"+{_secs(idle)}", "middle")
    for i, span in enumerate(spans):
        y = TOP + LANE * i
        start = float(span["start"])
        end = max(float(span["end"]), start)
        x0 = at(start)
        w = max(at(end) - x0, 3)
        body.append(
            f'<text class="lane" x="{left - 6}" y="{y + 15}" text-anchor="end">'
            f"{escape(str(span['label'])[:22])}</text>"
            f'<rect class="bar {escape(span["cls"])}" x="{x0:.1f}" '
            f'y="{y + 3}" width="{w:.1f}" height="{LANE - 6}" rx="2" '
            f'data-key="{escape(span["key"])}" data-kind="{escape(span["kind"])}" '
            f'data-start="{_num(start)}" data-end="{_num(end)}">'
            f"<title>{escape(span['title'])}</title></rect>"
        )
    return _svg(width, height, label, body, "timeline")


def _secs(value: float) -> str:
    if value >= 60:
        return f"{value / 60:.1f} min"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value * 1000:.0f} ms"


__all__ = ["bars_with_cap", "rate_band", "sparkline", "stacked_bars", "timeline"]
