"""Signed checkpoints of the hash chain (Ed25519, via ``cryptography``).

The hash chain makes edits detectable by anyone who kept an earlier head; a signature
makes the head itself attestable. ``checkpoint`` signs the chain head (topic, last event
id, its chain hash) with a private key from the environment and appends the signature as
a ``charter.audit.checkpoint`` event (itself chained). ``verify_checkpoints`` checks each
checkpoint against the recomputed chain and a public key: rewriting history and
recomputing every hash no longer passes, because the signed head would not match.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from charter.errors import CharterError

from .events import NewEvent
from .log import EventLog

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

SIGNING_KEY_ENV = "CHARTER_AUDIT_SIGNING_KEY"
CHECKPOINT_KIND = "charter.audit.checkpoint"
AUDIT_PERSONA = "charter.audit"  # not a valid persona name: never collides with one


class SigningError(CharterError):
    """A key that cannot be read, or a checkpoint that cannot be written."""


def _decode(text: str, what: str) -> bytes:
    raw = text.strip()
    for decode in (bytes.fromhex, base64.b64decode, base64.urlsafe_b64decode):
        try:
            data = decode(raw + ("=" * (-len(raw) % 4) if decode is not bytes.fromhex else ""))
        except (ValueError, binascii.Error):
            continue
        if len(data) == 32:
            return data
    raise SigningError(f"{what}: expected a PEM key or 32 raw bytes in hex or base64 (Ed25519)")


def load_private_key(text: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from PEM (PKCS#8) or 32 raw bytes in hex/base64."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if "-----BEGIN" in text:
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise SigningError(
                f"{SIGNING_KEY_ENV}: not a readable PEM private key ({exc})"
            ) from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningError(f"{SIGNING_KEY_ENV}: the PEM key is not an Ed25519 key")
        return key
    return Ed25519PrivateKey.from_private_bytes(_decode(text, SIGNING_KEY_ENV))


def load_public_key(text_or_path: str) -> Ed25519PublicKey:
    """An Ed25519 public key: PEM, 32 raw bytes in hex/base64, or a file holding either."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    text = text_or_path
    path = Path(text_or_path)
    if "-----BEGIN" not in text and len(text) < 4096 and path.is_file():
        text = path.read_text(encoding="utf-8")
    if "-----BEGIN" in text:
        try:
            key = serialization.load_pem_public_key(text.encode())
        except ValueError as exc:
            raise SigningError(f"--key: not a readable PEM public key ({exc})") from exc
        if not isinstance(key, Ed25519PublicKey):
            raise SigningError("--key: the PEM key is not an Ed25519 key")
        return key
    return Ed25519PublicKey.from_public_bytes(_decode(text, "--key"))


def public_key_text(key: Ed25519PublicKey) -> str:
    """The raw public key in hex (what ``audit verify --key`` takes)."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw.hex()


def message(topic: str, event_id: int, chain: str) -> bytes:
    """The signed bytes: canonical JSON of the head."""
    body = {"v": 1, "topic": topic, "event_id": event_id, "chain": chain}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def key_from_env(env: Mapping[str, str]) -> Ed25519PrivateKey | None:
    text = env.get(SIGNING_KEY_ENV)
    return load_private_key(text) if text else None


def checkpoint(log: EventLog, key: Ed25519PrivateKey, *, at: datetime) -> dict[str, Any]:
    """Sign the chain head and append it as a checkpoint event (one transaction)."""
    with log.write() as txn:
        last = txn.last_event_id()
        if last == 0:
            raise SigningError("the log is empty: nothing to sign")
        chains = dict(txn.chains(after=last - 1, limit=1))
        head = chains.get(last)
        if head is None:
            raise SigningError(f"event {last} is not chained: nothing to sign")
        signature = key.sign(message(log.topic, last, head))
        payload = {
            "event_id": last,
            "chain": head,
            "topic": log.topic,
            "public_key": public_key_text(key.public_key()),
            "signature": signature.hex(),
        }
        (event,) = txn.append([NewEvent(AUDIT_PERSONA, CHECKPOINT_KIND, at, payload)])
    return {**payload, "checkpoint_event_id": event.event_id}


@dataclass
class CheckpointReport:
    """Signed checkpoints found by :func:`verify_checkpoints`."""

    checkpoints: int = 0
    valid: int = 0
    signed_through: int | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoints": self.checkpoints,
            "valid": self.valid,
            "signed_through": self.signed_through,
            "problems": self.problems[:20],
        }


def verify_checkpoints(
    chains: Mapping[int, str | None],
    checkpoints: list[tuple[int, dict[str, Any]]],
    key: Ed25519PublicKey,
    topic: str,
) -> CheckpointReport:
    """Check every checkpoint (event id, payload) against the recomputed chain and key."""
    from cryptography.exceptions import InvalidSignature

    report = CheckpointReport()
    want_key = public_key_text(key)
    for event_id, payload in checkpoints:
        report.checkpoints += 1
        signed_id = int(payload.get("event_id") or 0)
        head = str(payload.get("chain") or "")
        if payload.get("public_key") != want_key:
            report.problems.append(
                {"event_id": event_id, "problem": "checkpoint signed by another key"}
            )
            continue
        try:
            signature = bytes.fromhex(str(payload.get("signature")))
            key.verify(signature, message(topic, signed_id, head))
        except (InvalidSignature, ValueError):
            report.problems.append({"event_id": event_id, "problem": "bad signature"})
            continue
        if chains.get(signed_id) != head:
            report.problems.append(
                {
                    "event_id": signed_id,
                    "problem": f"the signed head at event {signed_id} (checkpoint {event_id}) "
                    "does not match the log: history before it was rewritten",
                }
            )
            continue
        report.valid += 1
        report.signed_through = max(report.signed_through or 0, signed_id)
    if report.checkpoints == 0:
        report.problems.append({"event_id": 0, "problem": "no signed checkpoint in the log"})
    elif report.valid == 0 and not report.problems:
        report.problems.append({"event_id": 0, "problem": "no checkpoint signed by this key"})
    return report


__all__ = [
    "AUDIT_PERSONA",
    "CHECKPOINT_KIND",
    "SIGNING_KEY_ENV",
    "CheckpointReport",
    "SigningError",
    "checkpoint",
    "key_from_env",
    "load_private_key",
    "load_public_key",
    "message",
    "public_key_text",
    "verify_checkpoints",
]
