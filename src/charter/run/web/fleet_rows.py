"""The fleet table's rows, rendered in Python (a page has one per persona: 1,000 of them).

The row is the same markup the template would write, escaped by ``markupsafe``; Jinja's
per-attribute lookups cost ~0.5 ms a row, this ~0.03 ms (``benchmarks/console.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
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


def row(p: Mapping[str, Any], now: datetime) -> Markup:
    """One persona's row of the fleet table."""
    name = escape(p["name"])
    b = p["budget"]
    spent, limits = b["spent"], b["limits"]
    lifecycle = escape(p["lifecycle"])
    standing = p.get("standing")
    tier = escape(p.get("tier") or "")
    autonomy = Markup(f"{tier or '—'}")
    if standing:
        autonomy += Markup(
            f'<br><span class="standing standing-{escape(standing.get("kind"))}" '
            f'title="{escape(standing.get("reason") or "")}">{escape(standing.get("kind"))} to '
            f"{escape(standing.get('tier'))}</span>"
        )
    last = p.get("last_run")
    if last:
        finished = last.get("finished_at") or ""
        last_cell = Markup(
            f'<td data-field="last_run" data-sort="{escape(finished)}"><a href="/console/runs/'
            f'{escape(last.get("run_id"))}" class="state state-{escape(last.get("status"))}">'
            f"{escape(last.get('status'))}</a> {when(finished, now)}</td>"
        )
    else:
        last_cell = Markup('<td data-field="last_run" data-sort="">—</td>')
    daily = limits.get("daily_usd")
    budget = f"${_money(spent['day_usd'])}" + (f" / ${daily}" if daily else "")
    exhausted = " <strong>exhausted</strong>" if b.get("exhausted") else ""
    runs = p["sparklines"]["runs"]
    spend = p["sparklines"]["spend_usd"]
    runs24, spend24 = sum(runs), sum(spend)
    runs_svg = charts.sparkline(runs, f"{p['name']}: {runs24} runs in the last 24 hours")
    spend_svg = charts.sparkline(spend, f"{p['name']}: ${spend24:.4f} spent in the last 24 hours")
    dead = p.get("dead_lettered")
    dead = len(dead) if isinstance(dead, list | tuple) else dead
    error = p.get("last_error")
    if isinstance(error, Mapping):
        error = error.get("message")
    error = escape(error or "")
    nxt = p.get("next_scheduled_run")
    cells = [
        f'<tr data-persona="{name}">',
        f'<th scope="row" data-sort="{name}"><a href="/console/personas/{name}">{name}</a></th>',
        f'<td data-sort="{lifecycle}"><span class="state state-{lifecycle}" '
        f'data-field="lifecycle">{lifecycle}</span></td>',
        f'<td data-field="standing" data-sort="{tier}">{autonomy}</td>',
        last_cell,
        f'<td class="budget" data-field="spend" data-sort="{spent["day_usd"]}">'
        f"{escape(budget)}{exhausted}{spend_bar(spent['day_usd'], daily)}</td>",
        f'<td data-field="runs24" data-sort="{runs24}">{runs_svg}</td>',
        f'<td data-field="spend24" data-sort="{spend24}">{spend_svg}</td>',
        f'<td data-sort="{p["queue"]["count"]}">{p["queue"]["count"]}</td>',
        f'<td data-sort="{p["inbox"]["count"]}">{p["inbox"]["count"]}</td>',
        f'<td data-sort="{escape(dead)}">{escape(dead)}</td>',
        f'<td data-field="approvals" data-sort="{p.get("pending_approvals", 0)}">'
        f"{p.get('pending_approvals', 0)}</td>",
        f'<td data-sort="{escape(nxt or "")}">{when(nxt, now)}</td>',
        f'<td class="error last-error" title="{error}">{error}</td>',
        "</tr>",
    ]
    return Markup("".join(str(c) for c in cells))


__all__ = ["ago", "row", "spend_bar", "when"]
