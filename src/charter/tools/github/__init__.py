"""GitHub through its REST API (githubkit): a client per repository and its tools."""

from ._auth import AppInstallationTokens, InstallationToken
from ._client import MERGE_METHODS, Answer, GitHubClient, Request, split_repository
from ._tools import CAPABILITIES, OPERATIONS, GitHubTools, Operation, github_tools

__all__ = [
    "CAPABILITIES",
    "MERGE_METHODS",
    "OPERATIONS",
    "Answer",
    "AppInstallationTokens",
    "GitHubClient",
    "GitHubTools",
    "InstallationToken",
    "Operation",
    "Request",
    "github_tools",
    "split_repository",
]
