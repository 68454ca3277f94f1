"""charter.testing: protocol-faithful fakes of GitHub, Slack and PagerDuty, for tests.

Each fake is a real HTTP server on 127.0.0.1 that speaks the provider's wire format
(paths, methods, status codes, headers, error bodies as the provider documents them),
keeps the state a test asserts on, and records every request (``fake.requests``). Point
the integrations at it with the same environment variables production uses, so a team
tests its own personas and workflows offline, the way ``moto`` serves AWS code::

    from charter.testing import FakeGitHub

    with FakeGitHub(tokens=["ghp_test"]) as gh:
        gh.add_pull("octo/repo", 7, head_sha="a" * 40, diff=open("pr.diff").read())
        env = {"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": "ghp_test"}
        ...  # run the persona with env
        assert gh.reviews["octo/repo#7"][0]["comments"]

:func:`serve_fakes` starts all three from a world file (``charter demo`` runs the
template pack against them). Reference: docs/integrations.md.
"""

from ._server import FakeServer, RecordedRequest, Reply
from ._world import Fakes, serve_fakes
from .github import FakeApp, FakeGitHub, FakePull, diff_lines
from .pagerduty import FakePagerDuty
from .slack import FakeSlack

__all__ = [
    "FakeApp",
    "FakeGitHub",
    "FakePagerDuty",
    "FakePull",
    "FakeSlack",
    "Fakes",
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "diff_lines",
    "serve_fakes",
]
