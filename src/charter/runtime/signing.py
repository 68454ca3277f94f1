"""Signed checkpoints of the hash chain (Ed25519, via ``cryptography``).

The hash chains make edits detectable by anyone who kept an earlier head; a signature
makes the heads themselves attestable. ``checkpoint`` signs the Merkle root of every
chain's head (:func:`charter.runtime.audit.heads_root`: each persona chain's last event
id and link, and a migrated log's topic-wide chain) as of the topic's last event id, with a
private key from the environment, and appends the signature as a
``charter.audit.checkpoint`` event (itself chained, on the ``charter.audit`` chain).
``verify_checkpoints`` checks each checkpoint against the recomputed chains and a public
key: rewriting history and recomputing every hash no longer passes, because the signed
root would not match. Checkpoints of version 1 (written before persona chains) signed the
topic-wide chain's link at one event and are still checked against it.
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
    """The signed bytes of a version 1 checkpoint: canonical JSON of the topic-wide head."""
    body = {"v": 1, "topic": topic, "event_id": event_id, "chain": chain}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def message_v2(topic: str, event_id: int, root: str) -> bytes:
    """The signed bytes: canonical JSON of the heads' Merkle root as of ``event_id``."""
    body = {"v": 2, "topic": topic, "event_id": event_id, "root": root}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def key_from_env(env: Mapping[str, str]) -> Ed25519PrivateKey | None:
    text = env.get(SIGNING_KEY_ENV)
    return load_private_key(text) if text else None


def checkpoint(log: EventLog, key: Ed25519PrivateKey, *, at: datetime) -> dict[str, Any]:
    """Sign the chains' heads and append them as a checkpoint event (one transaction)."""
    from .audit import heads_root, legacy_head

    with log.write() as txn:
        last = txn.last_event_id()
        if last == 0:
            raise SigningError("the log is empty: nothing to sign")
        heads = txn.chain_heads()
        legacy = legacy_head(log)
        if not heads and legacy is None:
            raise SigningError(f"event {last} is not chained: nothing to sign")
        root = heads_root(heads, legacy)
        signature = key.sign(message_v2(log.topic, last, root))
        payload = {
            "v": 2,
            "event_id": last,
            "root": root,
            "chains": len(heads),
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
    *,
    roots: Mapping[int, str] | None = None,
) -> CheckpointReport:
    """Check every checkpoint (event id, payload) against the recomputed chains and key:
    a version 2 one against ``roots`` (the heads' root at each signed id), a version 1
    one against ``chains`` (the topic-wide link at each signed id)."""
    from cryptography.exceptions import InvalidSignature

    report = CheckpointReport()
    want_key = public_key_text(key)
    for event_id, payload in checkpoints:
        report.checkpoints += 1
        signed_id = int(payload.get("event_id") or 0)
        v2 = payload.get("v") == 2
        head = str(payload.get("root" if v2 else "chain") or "")
        if payload.get("public_key") != want_key:
            report.problems.append(
                {"event_id": event_id, "problem": "checkpoint signed by another key"}
            )
            continue
        try:
            signature = bytes.fromhex(str(payload.get("signature")))
            signed = (message_v2 if v2 else message)(topic, signed_id, head)
            key.verify(signature, signed)
        except (InvalidSignature, ValueError):
            report.problems.append({"event_id": event_id, "problem": "bad signature"})
            continue
        if ((roots or {}).get(signed_id) if v2 else chains.get(signed_id)) != head:
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
    "message_v2",
    "public_key_text",
    "verify_checkpoints",
]
