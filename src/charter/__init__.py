"""charter: personas with enforced charters for AI agents.

The public surface lives in the sub-packages; :mod:`charter.policy` is the core that
every enforcement point uses. This module stays import-light so ``charter --help``
is fast.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
