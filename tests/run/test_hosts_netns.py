"""``charter serve`` replicas on separate (simulated) hosts: each replica runs in its own
network namespace, linked to the root namespace by a veth pair, and reaches PostgreSQL
(127.0.0.1:5432 in the root namespace, unreachable from inside) only through a TCP
forwarder this test runs on the root end of its link (issue 15).

- any host takes a webhook and every work key runs exactly once across the hosts;
- a network partition (the host's link set down) while it holds a lease mid-run: the
  lease expires, another host takes the queued work and the redelivered key over, and
  when the link comes back the partitioned replica does not execute, complete or record
  the work it lost (the lease is checked in the transaction of the receipt that precedes
  every side effect);
- a host cut off inside a write transaction (holding the log's lock) does not stall the
  other hosts' writes for longer than the sessions' idle-in-transaction timeout, and its
  write never commits.

Only the test's own namespaces and addresses (a free 10.250.X.0/24) are addressed; they
are removed afterwards, also when the test fails. Needs root and ``ip netns``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from charter.runtime import open_event_log

from .conftest import charter_argv, executed, persona_toml
from .test_postgres import pg_url  # noqa: F401  (the fixture)

SECRET = "hosts-secret"
MERGE = {"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _netns_unavailable() -> str | None:
    """Why namespaces cannot be made here, or ``None``."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root here: `ip` (iproute2) is missing, see make sandbox-tools")
        return "`ip` (iproute2) is missing: make sandbox-tools installs it"
    probe = f"charter-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


class Forwarder:
    """A TCP relay on a host link's root end to PostgreSQL's loopback address: the only
    way a namespace reaches the database (as another host reaches it over the network)."""

    def __init__(self, listen: str, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server((listen, 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.close()


@dataclass
class Host:
    """One simulated host: a namespace, its link, its forwarder, its replica."""

    ns: str
    link: str  # the root end of the veth pair
    gateway: str  # the root end's address: the forwarder listens there
    address: str  # the namespace end's address: the replica listens there
    forwarder: Forwarder | None = None
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def cut(self) -> None:
        """Partition: the link goes down (established connections stall, nothing is
        reset: exactly what a host whose network drops looks like from both sides)."""
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.link, "up")


class Hosts:
    """Namespaces and veth pairs on a 10.250.X.0/24 no interface here uses."""

    def __init__(self) -> None:
        self.hosts: list[Host] = []
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
        start = os.getpid() % 200
        for step in range(200):
            third = 20 + (start + step) % 200
            if f" 10.250.{third}." not in used:
                break
        else:  # pragma: no cover - every candidate taken
            raise AssertionError("no free 10.250.X.0/24 for the test's hosts")
        self.third = third
        self.tag = f"{os.getpid() % 100000}"

    def add(self, pg: tuple[str, int]) -> Host:
        n = len(self.hosts)
        host = Host(
            ns=f"charter-h{self.tag}-{n}",
            link=f"chh{self.tag}{n}",
            gateway=f"10.250.{self.third}.{4 * n + 1}",
            address=f"10.250.{self.third}.{4 * n + 2}",
        )
        self.hosts.append(host)  # registered first: removed even if set-up fails halfway
        inner = f"chi{self.tag}{n}"
        _ip("netns", "add", host.ns)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", host.ns)
        _ip("addr", "add", f"{host.gateway}/30", "dev", host.link)
        _ip("link", "set", host.link, "up")
        _ip("-n", host.ns, "addr", "add", f"{host.address}/30", "dev", inner)
        _ip("-n", host.ns, "link", "set", inner, "up")
        _ip("-n", host.ns, "link", "set", "lo", "up")
        host.forwarder = Forwarder(host.gateway, pg)
        return host

    def remove(self) -> None:
        for host in self.hosts:
            for proc in host.procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
            if host.forwarder is not None:
                host.forwarder.close()
            # deleting the namespace (no process left in it) takes its veth end along;
            # the root end goes with its peer
            subprocess.run(["ip", "link", "del", host.link], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", host.ns], capture_output=True, check=False)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    reason = _netns_unavailable()
    if reason is not None:
        pytest.skip(reason)
    made = Hosts()
    try:
        yield made
    finally:
        made.remove()


def _on(host: Host, url: str) -> str:
    """``url`` (PostgreSQL on loopback) as the host sees it: through its forwarder."""
    assert host.forwarder is not None
    parts = urlsplit(url)
    user, at, _ = parts.netloc.rpartition("@")
    netloc = f"{user}{at}{host.gateway}:{host.forwarder.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _pg(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


def _serve(host: Host, pack: Path, url: str) -> str:
    env = {
        **os.environ,
        "CHARTER_WEBHOOK_SECRET_TEST": SECRET,
        "CHARTER_CONSOLE_TOKENS": "test:hosts-console-token",
    }
    argv = charter_argv("serve", "--host", host.address, "--port", "0",
                        "--manifest", str(pack), "--state", _on(host, url))  # fmt: skip
    proc = subprocess.Popen(["ip", "netns", "exec", host.ns, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    host.procs.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        proc.kill()
        raise AssertionError(line + proc.communicate()[1])
    base = line.split()[2]
    assert base.startswith(f"http://{host.address}:")
    return base


def _hook(base: str, ident: str, plan: dict[str, Any]) -> None:
    body = json.dumps({"id": ident, "type": "go", **plan}).encode()
    request = urllib.request.Request(f"{base}/hooks/test", data=body, method="POST")
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request.add_header("X-Hub-Signature-256", "sha256=" + digest)
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 202


def _log(url: str) -> list[tuple[str, dict[str, Any]]]:
    log = open_event_log(url=url)
    try:
        return [(e.kind, dict(e.payload)) for e in log.iter_all()]
    finally:
        log.close()


def _wait(url: str, test: Callable[[list[tuple[str, dict[str, Any]]]], bool]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if test(_log(url)):
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out; log: {[k for k, _ in _log(url)]}")


def _stop(hosts: Hosts) -> dict[int, str]:
    """SIGTERM every replica; their output by pid."""
    out: dict[int, str] = {}
    for host in hosts.hosts:
        for proc in host.procs:
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=30)
            out[proc.pid] = stdout + stderr
    return out


def _outcomes(log: list[tuple[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Each work key's run outcomes in log order (an expired lease counts as failed)."""
    runs = {p["run_id"]: p["work_key"] for k, p in log if k == "persona.run.started"}
    outcome: dict[str, list[str]] = {}
    for kind, p in log:
        if kind in ("persona.run.completed", "persona.run.failed"):
            outcome.setdefault(p["work_key"], []).append(kind.removeprefix("persona.run."))
        elif kind == "persona.lease.expired":
            outcome.setdefault(runs[p["run_id"]], []).append("expired")
    return outcome


def test_any_host_takes_a_webhook_and_work_runs_once(
    hosts: Hosts,
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack()
    three = [hosts.add(_pg(pg_url)) for _ in range(3)]
    # a host reaches the database only over its link: not on its own loopback
    probe = subprocess.run(
        ["ip", "netns", "exec", three[0].ns, "bash", "-c", "echo > /dev/tcp/127.0.0.1/5432"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert probe.returncode != 0
    bases = [_serve(host, pack, pg_url) for host in three]
    keys = [f"w{i}" for i in range(9)]
    for i, ident in enumerate(keys):
        _hook(bases[i % 3], ident, {"calls": []})  # round-robin over the hosts
    _wait(pg_url, lambda log: sum(k == "persona.run.completed" for k, _ in log) == 9)
    _stop(hosts)
    log = _log(pg_url)
    assert _outcomes(log) == {f"webhook:test:go:{k}": ["completed"] for k in keys}
    pids = {proc.pid for host in three for proc in host.procs}
    holders = {p["holder"] for k, p in log if k == "persona.lease.acquired"}
    assert {int(h.rsplit(":", 1)[1]) for h in holders} <= pids


def test_a_partitioned_host_does_not_finish_the_work_it_lost(
    hosts: Hosts,
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    """The lease holder's link goes down mid-run. Its lease (3 s TTL) expires, the other
    host runs the work queued behind it and the sender's redelivery of the lost key. The
    link comes back while the partitioned run is about to merge: it must not."""
    pack = make_pack(persona_toml(extra="runtime = { lease_ttl_seconds = 3 }"))
    a, b = hosts.add(_pg(pg_url)), hosts.add(_pg(pg_url))
    base = {a.ns: _serve(a, pack, pg_url), b.ns: _serve(b, pack, pg_url)}
    # the run sleeps 2 s (inside its 3 s lease: a healthy host completes it), then merges
    _hook(base[a.ns], "lost", {"sleep": 2, "calls": [MERGE]})
    _wait(pg_url, lambda log: any(k == "persona.lease.acquired" for k, _ in log))
    lease = next(p for k, p in _log(pg_url) if k == "persona.lease.acquired")
    pid = int(lease["holder"].rsplit(":", 1)[1])
    victim, survivor = (a, b) if a.procs[0].pid == pid else (b, a)
    assert victim.procs[0].pid == pid
    deadline = time.monotonic() + 10
    while not (pack / "started").exists():  # mid-run, holding its lease
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    victim.cut()
    try:
        # queued behind the partitioned lease (max_concurrency 1)
        _hook(base[survivor.ns], "queued", {"calls": []})
        # the lease expires; the survivor records it and runs the queued work
        _wait(pg_url, lambda log: "webhook:test:go:queued" in _completed(log))
        # the sender redelivers the key that failed with the lost lease: the survivor runs it
        _hook(base[survivor.ns], "lost", {"calls": [MERGE]})
        _wait(pg_url, lambda log: "webhook:test:go:lost" in _completed(log))
    finally:
        victim.heal()
    # the partitioned replica resumes (its stalled connection retransmits) and ends its run
    lost = lease["run_id"]
    _wait(
        pg_url,
        lambda log: any(k == "persona.run.recorded" and p["run_id"] == lost for k, p in log),
    )
    _stop(hosts)
    log = _log(pg_url)
    assert _outcomes(log) == {
        "webhook:test:go:lost": ["expired", "completed"],  # lost by A, redelivered to B
        "webhook:test:go:queued": ["completed"],
    }
    assert executed(pack) == [{"action": "merge", "pr": 7}]  # once: by the survivor
    expired = next(i for i, (k, p) in enumerate(log)
                   if k == "persona.lease.expired" and p["run_id"] == lost)  # fmt: skip
    after = [k for k, p in log[expired:] if p.get("run_id") == lost]
    # after its lease expired the lost run wrote nothing but its own record (failed); the
    # survivor's recovery put its work back for a retry (issue 31), which the redelivery of
    # the same key then ran once
    assert after == ["persona.lease.expired", "persona.work.retried", "persona.run.recorded"]
    (record,) = [p["record"] for k, p in log if k == "persona.run.recorded"
                 and p["run_id"] == lost]  # fmt: skip
    assert record["status"] == "failed"


def _completed(log: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [p["work_key"] for k, p in log if k == "persona.run.completed"]


HOLD_A_WRITE = """
import sys
from datetime import UTC, datetime
from charter.runtime import NewEvent, PostgresEventLog

log = PostgresEventLog(sys.argv[1])
try:
    with log.write() as txn:  # holds the topic's write lock
        print("locked", flush=True)
        sys.stdin.readline()
        txn.append([NewEvent("actor", "test.cut_off", datetime.now(UTC))])
    print("committed", flush=True)
except Exception as exc:
    print(f"failed: {type(exc).__name__}", flush=True)
"""


def test_a_host_cut_off_inside_a_write_does_not_stall_the_fleet(
    hosts: Hosts,
    pg_url: str,  # noqa: F811
) -> None:
    """A write transaction holds the log's advisory lock. A host whose link drops inside
    one leaves the server waiting on a connection that looks alive for as long as TCP
    keepalive takes (hours): every other replica's write waited with it. The server now
    ends a session idle in a transaction after a few seconds (charter sets
    ``idle_in_transaction_session_timeout`` on its connections), and the cut-off write
    fails instead of committing late."""
    from charter.runtime import NewEvent, PostgresEventLog

    host = hosts.add(_pg(pg_url))
    probe = PostgresEventLog(pg_url)  # the schema exists before the host's write
    probe.close()
    argv = [sys.executable, "-c", HOLD_A_WRITE, _on(host, pg_url)]
    proc = subprocess.Popen(["ip", "netns", "exec", host.ns, *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    host.procs.append(proc)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    assert line == "locked\n", line + proc.communicate()[1]
    host.cut()
    proc.stdin.write("go\n")  # its append now stalls on the dead link
    proc.stdin.flush()
    wrote: list[float] = []

    def write_elsewhere() -> None:
        started = time.monotonic()
        log = PostgresEventLog(pg_url)
        try:
            log.append([NewEvent("actor", "test.elsewhere", datetime.now(UTC))])
        finally:
            log.close()
        wrote.append(time.monotonic() - started)

    other = threading.Thread(target=write_elsewhere, daemon=True)
    other.start()
    other.join(timeout=20)
    stalled = other.is_alive()
    cut_at = time.monotonic()
    try:
        # the cut-off host's own write fails while the link is still down: its sent
        # data goes unacknowledged past tcp_user_timeout (before: it hung until TCP gave
        # up, about 15 minutes, or until the link came back)
        out, _ = proc.communicate(timeout=30)
        gave_up = time.monotonic() - cut_at
    finally:
        host.heal()  # (before the server-side fix: the only way the other write got through)
        other.join(timeout=30)
    assert not stalled, "a write on another host waited for the cut-off host's transaction"
    assert wrote and wrote[0] < 15
    assert out.strip() == "failed: OperationalError", out
    assert gave_up < 25
    kinds = [k for k, _ in _log(pg_url)]
    assert kinds == ["test.elsewhere"]  # the cut-off write never committed
