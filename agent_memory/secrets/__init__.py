"""Spotting secrets and personal identifiers in text a caller wants to remember.

A memory outlives the conversation that produced it and is replayed into later
prompts, so a password or a key that slips in would leak again and again. The
gate asks :func:`find_sensitive` before anything is written; documents and
transcripts are kept with each secret replaced (:func:`redact_sensitive`).

The detector is pattern and entropy based, in five parts: shapes that carry
their own meaning (``patterns``: vendor prefixes, key blocks, credentials in
URLs, wallet seed phrases), numbers with check digits and context (``numbers``:
cards, IBANs, ids), the secret half of a pair whose other half is public
(``pairs``: an account number beside a routing number, a password beside a login
e-mail), and values named by a word next to them in many languages (``keywords``:
"password", "PIN", "API key", "SSN"; ``context`` keeps "cache key" and "commit"
hashes out), all tried in one order (``scan``, which also reads through invisible
characters and escaped line breaks). It only ever returns the *kind* of secret: the
matched text is never returned, logged or kept, so a rejection message can be shown
to a user or a model.
"""

from .checks import iban_valid, luhn_valid
from .scan import KINDS, Finding, find_all_sensitive, find_sensitive, redact_sensitive

__all__ = ["KINDS", "Finding", "find_all_sensitive", "find_sensitive", "iban_valid", "luhn_valid", "redact_sensitive"]
