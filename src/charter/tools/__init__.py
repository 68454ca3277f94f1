"""charter.tools: GitHub, Slack and PagerDuty as agent tools, through their real APIs.

Integrations are tools of their own package: a workflow builds them and registers them
(``ctx.register_tools(...)``); they never reach into the runtime. Each operation is its
own tool with its own annotations (``read_only`` reads, ``network`` writes) and the seed
capability it exercises, so the persona's policy and autonomy tier decide each call.
Credentials stay in this process: results and errors are redacted, and
:data:`CREDENTIAL_VARS` never reach a shell the agent runs.

```python
from charter.tools import IntegrationSettings, GitHubClient, github_tools

settings = IntegrationSettings.for_pack(ctx.pack_dir)
client = GitHubClient(settings.github, "octo/repo")
ctx.register_tools(github_tools(client))
```

Heavy SDKs (githubkit, slack_sdk, pagerduty) are imported when a call is made.
"""

from ._retry import RetryPolicy
from .errors import (
    Conflict,
    ConnectionFailed,
    CredentialsMissing,
    Forbidden,
    IntegrationError,
    NotFound,
    RateLimited,
    RemoteError,
    ServiceUnavailable,
    Unauthorized,
    Unprocessable,
)
from .github import CAPABILITIES as GITHUB_CAPABILITIES
from .github import GitHubClient, github_tools
from .settings import (
    CREDENTIAL_VARS,
    GitHubSettings,
    IntegrationSettings,
    PagerDutySettings,
    SlackSettings,
)

__all__ = [
    "CREDENTIAL_VARS",
    "GITHUB_CAPABILITIES",
    "Conflict",
    "ConnectionFailed",
    "CredentialsMissing",
    "Forbidden",
    "GitHubClient",
    "GitHubSettings",
    "IntegrationError",
    "IntegrationSettings",
    "NotFound",
    "PagerDutySettings",
    "RateLimited",
    "RemoteError",
    "RetryPolicy",
    "ServiceUnavailable",
    "SlackSettings",
    "Unauthorized",
    "Unprocessable",
    "github_tools",
]
