"""The root of charter's exceptions: ``except charter.CharterError`` catches every error
charter raises on purpose (a bug still surfaces as a plain Python exception).

Each error keeps the built-in class it always had as a second base (``PolicyError`` is
still a ``ValueError``), so existing ``except ValueError`` code keeps working. The tree
(``tests/test_errors.py`` checks that every public exception class of charter is in it):

    CharterError
    ├── charter.policy
    │   ├── PolicyError (ValueError)            a policy file or dict does not parse
    │   ├── CommandParseError (ValueError)      a shell command line charter cannot read
    │   ├── HostError (ValueError)              a network target that is not a host
    │   ├── BadPathError (ValueError)           a path pattern that cannot be resolved
    │   └── ScopeViolation                      a scoped executor refused a tool
    ├── charter.manifest (validation issues are values, ManifestError; nothing raised)
    ├── charter.runtime
    │   ├── EventLogError (RuntimeError)        the event log cannot be read or written
    │   ├── PersonaRuntimeError                 the caller's fault: bad input, unknown names
    │   │   ├── UnknownPersonaError
    │   │   ├── UndeclaredTriggerError
    │   │   ├── UnknownRunError
    │   │   ├── InboxError
    │   │   └── HandoffError
    │   ├── SpecError (ValueError)              a runtime spec (budget, lease) that is invalid
    │   ├── TriggerError (ValueError)           a trigger payload or name that is invalid
    │   ├── ScheduleError (ValueError)          a cron schedule that is invalid
    │   ├── SigningError                        audit checkpoint keys and signatures
    │   └── FollowFailed                        admitting a drain's next item failed
    ├── charter.agent
    │   ├── AgentOptionError (ValueError)       an agent_loop option that is invalid
    │   ├── ProviderError                       a model provider call failed
    │   ├── McpServerError (RuntimeError)       an MCP server failed to start or answer
    │   ├── SessionError (ValueError)           a session id or store that is invalid
    │   ├── DaemonQueueFull (RuntimeError)      a daemon's trigger queue is at capacity
    │   ├── InvalidArguments                    a tool call's arguments miss its parameters
    │   ├── HostFileError (PermissionError)     a host-side file tool refused (policy, race, kind)
    │   └── DeadlineExceeded (TimeoutError)     a built-in tool ran past its deadline
    ├── charter.run
    │   ├── RunError                            a persona run cannot start or continue
    │   │   ├── UnknownPersona
    │   │   ├── ManifestInvalid
    │   │   ├── WorkflowLoadError
    │   │   ├── ForeignWorkflow                 an entry workflow for another host (harn)
    │   │   ├── ApprovalError
    │   │   ├── PromotionError
    │   │   └── EvalError
    │   ├── ReceiptError (RuntimeError)         a receipt could not be written
    │   │   └── LeaseLost
    │   ├── PricingError (RuntimeError)         a model has no price and a budget needs one
    │   ├── ModelProviderFailed (RuntimeError)  the workflow's model provider failed
    │   ├── BudgetExceeded                      a run's budget stopped it
    │   ├── ReplayDiverged (RuntimeError)       a resumed run asked for what it did not journal
    │   ├── A2AConfigError (ValueError)         an a2a:// handoff target is misconfigured
    │   └── AccessError (ValueError)            a console or API token is invalid
    ├── charter.tools (drawn in charter.tools.errors)
    │   └── IntegrationError                    a GitHub, Slack or PagerDuty call failed
    │       ├── CredentialsMissing
    │       ├── ConnectionFailed
    │       └── RemoteError
    │           ├── Unauthorized, Forbidden, NotFound, Conflict, Unprocessable
    │           └── RateLimited, ServiceUnavailable
    ├── charter.launch
    │   ├── LaunchError                         a launch cannot be planned or started
    │   ├── ResolveError                        a persona folder cannot be resolved
    │   ├── OverlayError                        a CLI overlay cannot be written
    │   └── SwapBusy                            another launch holds the target's lock
    └── charter.cli
        ├── ManifestRefused                     the selected manifest has validation errors
        └── DemoError (RuntimeError)            a step of `charter demo` failed

Not in the tree, on purpose: control-flow signals that unwind a run rather than report an
error (``RunParked``, ``RunStopped``: ``BaseException``, so ``except Exception`` in a
workflow cannot swallow them), and private helpers whose names start with ``_``.

Standard library only, below every package (``charter.policy`` imports it).
"""

from __future__ import annotations

__all__ = ["CharterError"]


class CharterError(Exception):
    """Base class of every exception charter raises on purpose."""
