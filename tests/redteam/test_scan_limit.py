"""Class 4 of issue 29: fail closed at a limit the model controls.

Creating more files than the sandbox's scan for denied names inspects used to leave the
names beyond the limit unmasked (the next ``cat .env`` printed the secret; the receipt
only added a note). Now a call whose profile could not be scanned completely is refused,
saying why, and the host-side tools still judge every path themselves.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from charter.sandbox import profile as profile_mod

from .conftest import run, sh, tc, text

pytestmark = pytest.mark.needs_sandbox


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    # the same code path as 20,001 files, with 201 (the limit is read at each build)
    monkeypatch.setattr(profile_mod, "SCAN_LIMIT", 200)
    return 200


def test_past_the_scan_limit_a_secret_is_not_printed(tmp_path: Path, small_limit: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "zz").mkdir()
    (ws / "zz" / ".env").write_text("API_KEY=sk-live-123\n")
    obs = run(
        ws,
        sh("cat zz/.env"),  # the allowed-size tree: masked as before
        sh(
            # in the secret's own directory: its listing is the one past the limit
            f"python3 -c \"[open(f'zz/f{{i}}', 'w') for i in range({small_limit + 1})]\""
        ),
        # (not ``cat zz/.env``: a sensitive name on the command line is refused by the
        # policy before the scan; what the policy cannot see must be refused by the scan)
        sh("cd zz && python3 -c \"print(open('.env').read())\""),
        sh("python3 -c \"print(open('zz/.env').read())\""),
        tc("read", path="zz/.env"),
    )
    assert "sk-live" not in text(obs[0]), obs[0]
    assert len(list((ws / "zz").iterdir())) == small_limit + 2
    for hostile in obs[2:]:
        assert "sk-live" not in text(hostile), hostile
    for refused in obs[2:4]:
        assert refused["status"] == "error"
        assert f"more than {small_limit} entries" in refused["error"], refused
        assert refused["receipt"]["needed_for"] == ["paths"]
    assert "sensitive" in text(obs[4])


def test_allowed_twin_under_the_limit_runs(tmp_path: Path, small_limit: int) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make = f"[open(f'f{{i}}', 'w').write('x') for i in range({small_limit // 2})]"
    obs = run(ws, sh(f'python3 -c "{make}"; cat f1'), sh("ls"))
    assert obs[0]["exit_code"] == 0 and obs[0]["stdout"] == "x", obs[0]
    assert len(obs[1]["stdout"].split()) == small_limit // 2
