"""The secret detector's public names, kept here for the code that imports them from this module.

The detector itself lives in :mod:`agent_memory.secrets`; see its docstring.
"""

from __future__ import annotations

from .secrets import KINDS, Finding, find_all_sensitive, find_sensitive, iban_valid, luhn_valid, redact_sensitive

__all__ = ["KINDS", "Finding", "find_all_sensitive", "find_sensitive", "iban_valid", "luhn_valid", "redact_sensitive"]
