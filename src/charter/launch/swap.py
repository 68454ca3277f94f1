"""Swap mode: put the composed overlay in place of the real file, and always put it back.

The original is backed up outside the repository (``$XDG_STATE_HOME/charter/swap``, else
``~/.local/state/charter/swap``) with a journal. One lock protocol per target covers both
run modes: a swap launch holds the target's lock file exclusively, every unshare launch
holds it shared (so the empty placeholder a bind mount needs is reference-counted: the
last unshare launch to leave removes it, and a swap launch is refused while any unshare
launch runs, and the other way round). Taking, converting and dropping these locks, and
deleting the lock file, happen under one short global guard lock, so a lock file can be
removed by the last holder without racing a newcomer (no stale lock files pile up).
After a crash (the lock is free, the journal is not) the next launch of either mode
restores the original first (or removes the overlay when there was none), as does
:func:`recover`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

from charter.errors import CharterError


class SwapBusy(CharterError):
    """Another launch holds the lock for this target."""


def state_dir(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "charter", "swap")


def _hash(data: bytes) -> str:
    """A cheap content fingerprint (hashlib's import alone costs more than a launch should)."""
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def _key(target: str) -> str:
    return _hash(os.path.abspath(target).encode())


@dataclass(frozen=True)
class Slot:
    directory: str
    key: str

    @property
    def lock(self) -> str:
        return os.path.join(self.directory, self.key + ".lock")

    @property
    def journal(self) -> str:
        return os.path.join(self.directory, self.key + ".json")

    @property
    def backup(self) -> str:
        return os.path.join(self.directory, self.key + ".orig")


def _slot(target: str, env: Mapping[str, str] | None) -> Slot:
    directory = state_dir(env)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return Slot(directory, _key(target))


def _try_lock(path: str, mode: int = fcntl.LOCK_EX) -> IO[str] | None:
    fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
    try:
        fcntl.flock(fh.fileno(), mode | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


@contextmanager
def _guard(slot: Slot) -> Iterator[None]:
    """The global guard: brief, blocking; every lock-file open/convert/unlink happens in it."""
    with open(os.path.join(slot.directory, "guard.lock"), "a+", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def _undo_crashed(slot: Slot, target: str) -> None:
    """Undo what a launch that died (kill -9) left; refuse with the recover hint if we can't."""
    try:
        journal = _restore(slot)
    except (OSError, ValueError, KeyError) as exc:
        raise SwapBusy(
            f"{target} was left swapped by a launch that died and could not be restored "
            f"({exc}); run `charter recover {os.path.dirname(target)}`"
        ) from None
    if journal is not None and journal.get("kind", "swap") == "swap":
        import sys

        print(
            f"charter: restored {journal.get('target')} left swapped by a launch that died "
            f"(pid {journal.get('pid')})",
            file=sys.stderr,
        )


def _release(slot: Slot, lock: IO[str]) -> None:
    """Drop ``lock``; the last holder undoes the journal and deletes the lock file."""
    with _guard(slot):
        lock.close()
        last = _try_lock(slot.lock)
        if last is None:
            return  # other unshare launches still use the placeholder
        try:
            _restore(slot)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(slot.lock)
        finally:
            last.close()


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _restore(slot: Slot) -> dict[str, Any] | None:
    """Undo what the journal records; return the journal (``None`` when there was none)."""
    try:
        with open(slot.journal, encoding="utf-8") as fh:
            journal: dict[str, Any] = json.load(fh)
    except (OSError, ValueError):
        return None
    target = str(journal["target"])
    kind = journal.get("kind", "swap")
    written = journal.get("written")
    if kind == "placeholder":
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                os.rmdir(target)  # only while empty (OSError otherwise: kept)
            elif os.path.isfile(target) and os.path.getsize(target) == 0:
                os.unlink(target)
        except OSError:
            pass
    elif journal.get("existed"):
        if os.path.exists(slot.backup):
            _keep_if_changed(target, written, slot)
            tmp = target + ".charter-restore"
            shutil.copy2(slot.backup, tmp)
            os.replace(tmp, target)
            os.unlink(slot.backup)
    else:
        if os.path.lexists(target):
            _keep_if_changed(target, written, slot)
            os.unlink(target)
    os.unlink(slot.journal)
    return journal


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return _hash(fh.read())
    except OSError:
        return None


def _keep_if_changed(target: str, written: object, slot: Slot) -> None:
    """If the tool edited the overlay, keep its version next to the backup (never lose work)."""
    digest = _digest(target)
    if digest is not None and written is not None and digest != written:
        shutil.copy2(target, os.path.join(slot.directory, f"{slot.key}.edited-{int(time.time())}"))


@contextmanager
def swapped(
    target: str, text: str, *, env: Mapping[str, str] | None = None, pid: int | None = None
) -> Iterator[Slot]:
    """Within the block, ``target`` holds ``text``; afterwards the original is back."""
    slot = _slot(target, env)
    with _guard(slot):
        lock = _try_lock(slot.lock)
        if lock is None:
            raise SwapBusy(
                f"another charter launch is using {target} (swap or unshare mode); wait for "
                "it to end"
            )
        try:
            _undo_crashed(slot, target)  # a crashed earlier launch left a journal: undo it
            existed = os.path.lexists(target)
            if existed:
                shutil.copy2(target, slot.backup, follow_symlinks=False)
            data = text.encode("utf-8")
            _write_json(
                slot.journal,
                {
                    "kind": "swap",
                    "target": os.path.abspath(target),
                    "existed": existed,
                    "backup": slot.backup if existed else None,
                    "written": _hash(data),
                    "pid": pid or os.getpid(),
                    "started": time.time(),
                },
            )
            tmp = target + f".charter-{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            _restore(slot)
            lock.close()
            raise
    try:
        yield slot
    finally:
        _release(slot, lock)


@contextmanager
def placeholder(
    target: str, *, env: Mapping[str, str] | None = None, directory: bool = False
) -> Iterator[bool]:
    """Hold ``target`` for an unshare launch; make sure it exists (a bind mount needs a file,
    or with ``directory`` an empty directory; either is removed at the end while empty).

    Shared with other unshare launches of the same target (the placeholder stays until
    the last of them ends); refused with :class:`SwapBusy` while a swap launch holds it.
    Yields whether this launch created the placeholder.
    """
    slot = _slot(target, env)
    created = False
    with _guard(slot):
        lock = _try_lock(slot.lock)  # exclusive: are we alone?
        if lock is not None:
            try:
                _undo_crashed(slot, target)  # whatever a dead launch left behind
                fcntl.flock(lock.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BaseException:
                lock.close()
                raise
        else:
            lock = _try_lock(slot.lock, fcntl.LOCK_SH)
            if lock is None:
                raise SwapBusy(f"a swap-mode charter launch is using {target}; wait for it to end")
        if not os.path.lexists(target):
            try:
                _write_json(
                    slot.journal,
                    {"kind": "placeholder", "target": os.path.abspath(target), "pid": os.getpid()},
                )
                if directory:
                    os.mkdir(target, 0o755)
                else:
                    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                    os.close(fd)
                created = True
            except BaseException:
                lock.close()
                raise
    try:
        yield created
    finally:
        _release(slot, lock)


def recover(
    directory: str | None = None, *, env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Restore every target a crashed launch left swapped (optionally only under ``directory``).

    Journals whose lock is still held belong to a running launch and are left alone.
    """
    base = state_dir(env)
    done: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return done
    root = os.path.realpath(directory) if directory else None
    for name in names:
        if not name.endswith(".json"):
            continue
        slot = Slot(base, name[: -len(".json")])
        try:
            with open(slot.journal, encoding="utf-8") as fh:
                target = str(json.load(fh).get("target", ""))
        except (OSError, ValueError):
            continue
        if root is not None and not (
            os.path.realpath(target) == root
            or os.path.realpath(target).startswith(root.rstrip("/") + "/")
        ):
            continue
        with _guard(slot):
            lock = _try_lock(slot.lock)
            if lock is None:
                done.append({"target": target, "action": "skipped: a launch is still running"})
                continue
            try:
                journal = _restore(slot)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(slot.lock)
            finally:
                lock.close()
        if journal is None:
            continue
        if journal.get("kind") == "placeholder":
            action = "removed the empty placeholder"
        elif journal.get("existed"):
            action = "restored the original"
        else:
            action = "removed the overlay (there was no original)"
        done.append({"target": target, "action": action})
    return done
