from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.testing import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
DIFF = (ROOT / "examples/personas/fixtures/diffs/pr-462.diff").read_text()
HEAD = "a42b0ea937df821c296119c26916c7c31dfa3f0d"
TOKEN = "ghp_SECRETSECRETSECRET0123456789"


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(tokens=[TOKEN])
    fake.add_pull("octo/app", 462, HEAD, diff=DIFF, title="cap the backoff")
    fake.protect("octo/app", "main", ["tests"])
    fake.add_check_run("octo/app", HEAD, "tests", "success")
    with fake:
        yield fake
