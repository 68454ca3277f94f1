"""The fleet table's rows, rendered in Python (a page has one per persona: 1,000 of them).

The row is the same markup the template would write, escaped by ``markupsafe``; Jinja's
per-attribute lookups cost ~0.5 ms a row. What a row shows is taken flat (:class:`RowView`,
relative times included) and rows that show the same as on a previous page are not drawn
again (memoised): most of a fleet does not change between two loads.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup, escape

from . import charts


def ago(text: str | None, now: datetime) -> str:
    """``3 min ago`` / ``in 2 h`` for an RFC 3339 time (the exact time goes in ``title``)."""
    from charter.runtime import parse_time

    if not text:
        return ""
    try:
        then = parse_time(text)
    except (TypeError, ValueError):
        return str(text)
    seconds = (now - then).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 45:
        words = f"{int(seconds)} s"
    elif seconds < 3600:
        words = f"{round(seconds / 60)} min"
    elif seconds < 86400:
        words = f"{round(seconds / 3600)} h"
    else:
        words = f"{round(seconds / 86400)} d"
    return f"in {words}" if future else f"{words} ago"


def when(text: str | None, now: datetime) -> Markup:
    """A ``<time>`` with the relative words, the exact time in ``datetime`` and ``title``."""
    if not text:
        return Markup("—")
    t = escape(text)
    return Markup(f'<time datetime="{t}" title="{t}" data-rel>{escape(ago(text, now))}</time>')


def spend_bar(spent: float, cap: float | None) -> Markup:
    """Spend against its cap as a bar (hidden from screen readers: the numbers are beside it)."""
    if not cap:
        return Markup("")
    pct = spent / cap * 100
    level = " over" if pct >= 100 else " high" if pct >= 80 else ""
    return Markup(
        f'<span class="spendbar{level}" aria-hidden="true">'
        f'<span style="width: {min(pct, 100):.1f}%"></span></span>'
    )


def _money(value: Any) -> str:
    return f"{float(value or 0):.4f}"


@dataclass(frozen=True)
class RowView:
    """What one row shows, flat and hashable: rows that show the same are drawn once."""

    name: str
    lifecycle: str
    tier: str
    standing: tuple[str, str, str] | None  # kind, tier, reason
    last_run: tuple[str, str, str, str] | None  # run id, status, finished at, how long ago
    day_usd: float
    daily_usd: float | None
    exhausted: bool
    runs: tuple[int, ...]
    spend: tuple[float, ...]
    queue: int
    inbox: int
    dead: str
    approvals: int
    error: str
    next_run: tuple[str, str] | None  # at, how long until


def view(p: Mapping[str, Any], now: datetime) -> RowView:
    """The row's content from a fleet row (``/api/fleet``'s ``personas[]``) at ``now``."""
    b = p["budget"]
    standing = p.get("standing")
    last = p.get("last_run")
    finished = (last or {}).get("finished_at") or ""
    dead = p.get("dead_lettered")
    error = p.get("last_error")
    if isinstance(error, Mapping):
        error = error.get("message")
    nxt = p.get("next_scheduled_run")
    return RowView(
        name=str(p["name"]),
        lifecycle=str(p["lifecycle"]),
        tier=str(p.get("tier") or ""),
        standing=(
            (
                str(standing.get("kind")),
                str(standing.get("tier")),
                str(standing.get("reason") or ""),
            )
            if standing
            else None
        ),
        last_run=(
            (str(last.get("run_id")), str(last.get("status")), finished, ago(finished, now))
            if last
            else None
        ),
        day_usd=float(b["spent"]["day_usd"]),
        daily_usd=b["limits"].get("daily_usd"),
        exhausted=bool(b.get("exhausted")),
        runs=tuple(p["sparklines"]["runs"]),
        spend=tuple(p["sparklines"]["spend_usd"]),
        queue=int(p["queue"]["count"]),
        inbox=int(p["inbox"]["count"]),
        dead=str(len(dead) if isinstance(dead, list | tuple) else dead),
        approvals=int(p.get("pending_approvals", 0)),
        error=str(error or ""),
        next_run=(str(nxt), ago(nxt, now)) if nxt else None,
    )


def row(p: Mapping[str, Any], now: datetime) -> Markup:
    """One persona's row of the fleet table."""
    return _render(view(p, now))


def _time(at: str, words: str) -> str:
    t = escape(at)
    return f'<time datetime="{t}" title="{t}" data-rel>{escape(words)}</time>'


@functools.lru_cache(maxsize=4096)
def _render(v: RowView) -> Markup:
    name = escape(v.name)
    lifecycle = escape(v.lifecycle)
    tier = escape(v.tier)
    autonomy = str(tier or "—")
    if v.standing:
        kind, to, reason = (escape(x) for x in v.standing)
        autonomy += (
            f'<br><span class="standing standing-{kind}" title="{reason}">{kind} to {to}</span>'
        )
    if v.last_run:
        run_id, status, finished, words = v.last_run
        last_cell = (
            f'<td data-field="last_run" data-sort="{escape(finished)}"><a href="/console/runs/'
            f'{escape(run_id)}" class="state state-{escape(status)}">{escape(status)}</a> '
            f"{_time(finished, words) if finished else '—'}</td>"
        )
    else:
        last_cell = '<td data-field="last_run" data-sort="">—</td>'
    budget = f"${v.day_usd:.4f}" + (f" / ${v.daily_usd}" if v.daily_usd else "")
    exhausted = " <strong>exhausted</strong>" if v.exhausted else ""
    runs24, spend24 = sum(v.runs), sum(v.spend)
    runs_svg = charts.sparkline(v.runs, f"{v.name}: {runs24} runs in the last 24 hours")
    spend_svg = charts.sparkline(v.spend, f"{v.name}: ${spend24:.4f} spent in the last 24 hours")
    error = escape(v.error)
    nxt_sort = escape(v.next_run[0]) if v.next_run else ""
    nxt = _time(*v.next_run) if v.next_run else "—"
    cells = [
        f'<tr data-persona="{name}">',
        f'<th scope="row" data-sort="{name}"><a href="/console/personas/{name}">{name}</a></th>',
        f'<td data-sort="{lifecycle}"><span class="state state-{lifecycle}" '
        f'data-field="lifecycle">{lifecycle}</span></td>',
        f'<td data-field="standing" data-sort="{tier}">{autonomy}</td>',
        last_cell,
        f'<td class="budget" data-field="spend" data-sort="{v.day_usd}">'
        f"{escape(budget)}{exhausted}{spend_bar(v.day_usd, v.daily_usd)}</td>",
        f'<td data-field="runs24" data-sort="{runs24}">{runs_svg}</td>',
        f'<td data-field="spend24" data-sort="{spend24}">{spend_svg}</td>',
        f'<td data-sort="{v.queue}">{v.queue}</td>',
        f'<td data-sort="{v.inbox}">{v.inbox}</td>',
        f'<td data-sort="{escape(v.dead)}">{escape(v.dead)}</td>',
        f'<td data-field="approvals" data-sort="{v.approvals}">{v.approvals}</td>',
        f'<td data-sort="{nxt_sort}">{nxt}</td>',
        f'<td class="error last-error" title="{error}">{error}</td>',
        "</tr>",
    ]
    return Markup("".join(cells))


__all__ = ["RowView", "ago", "row", "spend_bar", "view", "when"]
