"""Building the stored rows of an append: ids, text columns and the hash-chain links.

Both backends store the same row per event: ``(topic, event_id, persona,
persona_version, actor, kind, occurred_at, payload, chain)`` with ``occurred_at`` in
RFC 3339 and ``payload`` as compact JSON with sorted keys. The chain link hashes the
canonical form of :func:`charter.runtime.audit.canonical`; here it is assembled from the
payload's JSON (encoded once, reused for the stored column) and the already-encoded
scalar fields, so an append encodes each payload once instead of twice, and never goes
through a per-event dict or a second model. ``tests/runtime/test_append_rows.py`` checks
that the result is byte for byte :func:`~charter.runtime.audit.canonical`.

Each persona has its own chain (issue 36): an event's link covers the previous link of
the same persona, so appends for different personas never depend on each other's rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from .clock import format_time
from .events import Event, NewEvent

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # The C encoder behind ``json.dumps``, made once (``JSONEncoder.encode`` builds a new
    # one per call). No circular-reference markers: ``NewEvent`` already refused circular
    # payloads, and a shared markers dict would not be safe across threads.
    _iterencode = _c_make_encoder(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
        True, False, True,
    )  # fmt: skip

    def _dump_payload(payload: dict[str, Any]) -> str:
        return "".join(_iterencode(payload, 0))

else:  # pragma: no cover - interpreters without the C accelerator
    _dump_payload = _ENCODER.encode  # type: ignore[assignment]

#: a JSON string literal, as ``json.dumps(..., ensure_ascii=False)`` writes it
_quote = json.encoder.encode_basestring

Row = tuple[str, int, str, str | None, str, str, str, str, str]


def portable(value: Any) -> Any:
    """``value`` with the floats both backends read back as they were hashed.

    PostgreSQL's jsonb keeps a number's decimal digits, not its float-ness: ``1e+16``
    reads back as the integer ``10000000000000000`` and ``-0.0`` as ``0.0``. Hashing the
    float while the log returns the integer broke ``audit verify``; so before a payload is
    hashed and stored, such floats become what jsonb gives back (the integer of their
    shortest decimal form, and ``0.0``), on both backends alike.
    """
    if isinstance(value, float):
        if value == 0.0:
            return 0.0
        text = repr(value)
        if "e+" in text:
            return int(Decimal(text))
        return value
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    return value


def build_rows(
    topic: str, last_event_id: int, heads: dict[str, str], events: Sequence[NewEvent]
) -> tuple[list[Event], list[Row]]:
    """The events as appended after ``last_event_id`` and their rows.

    ``heads`` holds the previous link of each persona's chain (``""`` where a chain
    starts), for every persona of ``events``; it is moved to the new links only once every
    row is built. Raises ``TypeError``/``ValueError`` (nothing written, ``heads``
    unchanged) when a payload cannot be stored as JSON.
    """
    out: list[Event] = []
    rows: list[Row] = []
    # the scalar part of the canonical form repeats within a batch: encode it once
    prefixes: dict[tuple[str, str | None, str, str, datetime], tuple[bytes, str]] = {}
    moved: dict[str, bytes] = {}
    sha256 = hashlib.sha256
    event_id = last_event_id
    for new in events:
        event_id += 1
        payload = dict(new.payload)  # the caller's dict stays the caller's
        body = _dump_payload(payload)
        if "e+" in body or "-0.0" in body:  # cheap test first: rare in real payloads
            payload = portable(payload)
            body = _dump_payload(payload)
        at = new.occurred_at
        key = (new.persona, new.persona_version, new.actor, new.kind, at)
        found = prefixes.get(key)
        if found is None:
            when = format_time(at)
            version = "null" if new.persona_version is None else _quote(new.persona_version)
            prefix = (
                f"{_quote(topic)},{_quote(new.persona)},{version},{_quote(new.actor)},"
                f'{_quote(new.kind)},"{when}",'
            )
            found = prefixes[key] = (prefix.encode(), when)
        previous = moved.get(new.persona)
        if previous is None:
            previous = heads[new.persona].encode()
        link = sha256(b"%b\n[%d,%b%b]" % (previous, event_id, found[0], body.encode()))
        text = link.hexdigest()
        moved[new.persona] = text.encode()
        out.append(
            Event(
                event_id,
                topic,
                new.persona,
                new.kind,
                at,
                payload,
                new.actor,
                new.persona_version,
            )
        )
        rows.append(
            (
                topic,
                event_id,
                new.persona,
                new.persona_version,
                new.actor,
                new.kind,
                found[1],
                body,
                text,
            )
        )
    for persona, last in moved.items():
        heads[persona] = last.decode()
    return out, rows
