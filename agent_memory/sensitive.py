"""Spotting secrets and personal identifiers in text a caller wants to remember.

A memory outlives the conversation that produced it and is replayed into later
prompts, so a password or a key that slips in would leak again and again. The
gate asks :func:`find_sensitive` before anything is written.

The detector is a table of compiled patterns, tried in order (most specific
first, so a JWT sent as ``Bearer eyJ...`` is named a JWT), each with an
optional validator that removes the usual false positives: Luhn for card
numbers, mod 97 for IBANs, a randomness check for generic ``token=...`` values.
It only ever returns the *kind* of secret: the matched text is never returned,
logged or kept, so a rejection message can be shown to a user or a model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["KINDS", "find_sensitive", "iban_valid", "luhn_valid"]


# --- validators: pure checks on one matched string ------------------------------------


def luhn_valid(number: str) -> bool:
    """The Luhn checksum every payment card carries; non-digits are ignored.

    Random 13-19 digit numbers (order ids, phone numbers with country codes)
    pass only one time in ten, which is why cards are checked and not guessed.
    """
    digits = [int(c) for c in number if c.isdigit()]
    if not digits:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """ISO 13616 check: move the first four characters to the end, letters to numbers, mod 97 == 1."""
    s = re.sub(r"\s", "", iban).upper()
    if not (15 <= len(s) <= 34) or not s.isalnum():
        return False
    return int("".join(str(int(c, 36)) for c in s[4:] + s[:4])) % 97 == 1


def _looks_random(value: str) -> bool:
    """True for key-like values: mixes letters and digits and has high entropy.

    Keeps ``token: your_api_key_here`` or ``api_key = <YOUR KEY>`` (placeholders,
    all letters) and ``token is valid`` from being taken for a real credential.
    """
    if len(value) < 16 or not re.search(r"\d", value) or not re.search(r"[A-Za-z]", value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.0


# Words that follow "password is" in sentences about passwords rather than in a stated password.
_NOT_A_PASSWORD = frozenset(
    """a an the my your our their his her its this that it in on at of for to by with from not no
    set reset required needed incorrect correct wrong invalid expired changed saved stored managed
    kept hidden secret same different empty missing blank too very weak strong long short new old
    unknown forgotten locked protected encrypted hashed case-sensitive sent shared""".split()
)


def _stated_value(match: re.Match[str]) -> bool:
    """The value after "password is"/"password:" is a plausible password, not prose or a placeholder.

    After "is"/"was" the value must look like a password (a digit or a symbol)
    or end the clause: "my password is banana." states one, "the passcode was
    sent by SMS" does not.
    """
    raw = match.group("value")
    value = raw.strip("\"'`.,;:!?()[]{}<>")
    if not value or value.lower() in _NOT_A_PASSWORD:
        return False
    # ***, xxx, ${DB_PASSWORD}, %(password)s: placeholders that hold no secret.
    if re.fullmatch(r"(\*+|x+|\.+|\$\{?\w+\}?|%\(\w+\)s|\{\{?\s*\w+\s*\}?\})", value, re.I):
        return False
    if match.groupdict().get("verb") is None:
        return True
    rest = match.string[match.end():]
    return bool(re.search(r"[^A-Za-z'-]", value)) or raw[-1] in ".,;!?" or rest.strip() == "" or rest[0] == "\n"


def _random_value(match: re.Match[str]) -> bool:
    return _looks_random(match.group("value"))


def _card_check(match: re.Match[str]) -> bool:
    return luhn_valid(match.group(0))


def _iban_check(match: re.Match[str]) -> bool:
    return iban_valid(match.group(0))


def _dni_check(match: re.Match[str]) -> bool:
    """Spanish DNI: the letter is ``"TRWAGMYFPDXBNJZSQVHLCKE"[number % 23]``."""
    number, letter = match.group("num"), match.group("letter")
    return "TRWAGMYFPDXBNJZSQVHLCKE"[int(number) % 23] == letter.upper()


# --- the table ------------------------------------------------------------------------


class _Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None


_DB_SCHEMES = (
    r"(?:postgres(?:ql)?|mysql|mariadb|mssql|sqlserver|oracle|mongodb(?:\+srv)?|rediss?|amqps?"
    r"|clickhouse|cockroachdb)"
)
# "password", optionally "... for the office wifi", before the verb that states it.
_PASSWORD_WORD = (
    r"(?<![A-Za-z])(?:password|passwd|passcode|passphrase)(?![A-Za-z])"
    r"(?:\s+(?:for|to|of|on)(?:\s+[\w.@-]+){1,3}?)?"
)
_SEP = r"\s*(?:=|:|(?P<verb>\bis\b|\bwas\b))\s*"
_KEY_VALUE = r"""["']?(?P<value>[A-Za-z0-9_\-./+=~]{16,})"""

_RULES: tuple[_Rule, ...] = (
    _Rule("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    _Rule("a JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*")),
    _Rule(
        "a database URL with a password",
        re.compile(rf"(?i)\b(?:jdbc:)?{_DB_SCHEMES}(?:\+\w+)?://[^\s:/@]+:(?P<value>[^\s@/]+)@[^\s/]+"),
        _stated_value,
    ),
    _Rule(
        "a URL with a password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@]+:(?P<value>[^\s@/]+)@[^\s/]+"),
        _stated_value,
    ),
    # Vendor keys: prefixes documented by each provider.
    _Rule("an API key", re.compile(r"\bsk-(?:ant-|proj-)?(?P<value>[A-Za-z0-9_-]{20,})"), _random_value),
    _Rule("an API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    _Rule("an API key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    _Rule("an access token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    _Rule("an access token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    _Rule("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    _Rule(
        "an AWS secret key",
        re.compile(
            r"(?i)(?<![A-Za-z])aws.{0,30}?secret.{0,30}?"
            r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
    # Generic assignments: only flagged when the value looks random.
    _Rule(
        "an API key",
        re.compile(
            r"(?i)(?<![A-Za-z])(?:api[_ -]?key|api[_-]?secret|secret[_-]?key|client[_-]?secret|access[_-]?key)"
            + _SEP + _KEY_VALUE
        ),
        _random_value,
    ),
    _Rule(
        "an access token",
        re.compile(r"(?i)(?<![A-Za-z])(?:(?:access|auth|refresh|api|session)[_ -]?)?token" + _SEP + _KEY_VALUE),
        _random_value,
    ),
    _Rule("an access token", re.compile(r"\bBearer\s+(?P<value>[A-Za-z0-9_\-.~+/]{16,}=*)"), _random_value),
    # Passwords stated in prose or config.
    _Rule("a password", re.compile(rf"(?i){_PASSWORD_WORD}{_SEP}(?P<value>\S+)"), _stated_value),
    _Rule("a password", re.compile(r"(?i)(?<![A-Za-z])pwd\s*=\s*(?P<value>\S+)"), _stated_value),
    _Rule("a PIN", re.compile(r"(?i)\bpin(?:\s*(?:code|number))?\s*(?:=|:|\bis\b|\bwas\b)\s*\d{4,8}\b")),
    # Payment cards: 13-19 digits, contiguous or in the printed groups (4-4-4-4[-3], Amex 4-6-5).
    _Rule(
        "a payment card number",
        re.compile(
            r"(?<![\d+])(?<!\d[ -])(?:[2-6]\d{12,18}"
            r"|[2-6]\d{3}(?P<sep>[ -])\d{4}(?P=sep)\d{4}(?P=sep)\d{1,4}(?:(?P=sep)\d{3})?"
            r"|3[47]\d{2}[ -]\d{6}[ -]\d{5})(?!\d)(?![ -]\d)"
        ),
        _card_check,
    ),
    # National ids. US SSN without the never-issued ranges (area 000, 666, 9xx; group 00; serial 0000).
    _Rule(
        "a national id number",
        re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}(?P<sep>[- ])(?!00)\d{2}(?P=sep)(?!0000)\d{4}(?![\d-])"),
    ),
    # UK National Insurance number (HMRC's excluded letters and prefixes).
    _Rule(
        "a national id number",
        re.compile(
            r"\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
            r" ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"
        ),
    ),
    # Spanish DNI: 8 digits and a check letter.
    _Rule(
        "a national id number",
        re.compile(r"(?<![\dA-Za-z])(?P<num>\d{8})-?(?P<letter>[A-Z])(?![A-Za-z\d])"),
        _dni_check,
    ),
    _Rule(
        "a bank account number (IBAN)",
        re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"),
        _iban_check,
    ),
)

#: Every kind :func:`find_sensitive` can return, in the order they are tried.
KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in _RULES))


def find_sensitive(text: str) -> str | None:
    """The kind of the first secret found (``"a password"``, ``"an API key"``...), or None.

    Kinds are tried from most to least specific; the returned name fits in
    "content looks like it contains {kind}". The secret itself is never returned.
    """
    for rule in _RULES:
        for match in rule.pattern.finditer(text):
            if rule.check is None or rule.check(match):
                return rule.kind
    return None
