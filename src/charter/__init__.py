"""charter: personas with enforced charters for AI agents.

The public surface lives in the sub-packages; :mod:`charter.policy` is the core that
every enforcement point uses. This module stays import-light so ``charter --help``
is fast: :class:`CharterError` (the root of every error charter raises, its tree drawn in
:mod:`charter.errors`) is the only name it imports.
"""

from charter.errors import CharterError

__version__ = "0.1.0"

__all__ = ["CharterError", "__version__"]
