"""Secrets named by a word next to them: "password", "PIN", "API key", "CVV", "SSN" in many languages.

Each rule finds a credential word, then reads the few words after it (the
*window*: one clause, at most a few dozen characters) for a value of the right
form. What counts as a value depends on the word:

- after a password word, a token that reads like a chosen password ("Sunflower!12"),
  or right after "is"/":"/"=" anything that is not a word of prose ("banana." ends
  the clause, "is required" does not);
- after a PIN or door-code word, 3 to 8 digits;
- after a key or token word, a token that looks random (long, mixed, high entropy);
- after an id, account or passport word, a number of the right length.

The readers live in :mod:`.values`; this module finds the words (around the anchors
the scanner found, see :mod:`.rules`) and holds the rule table. Only the value's span
is returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from .checks import is_placeholder, password_like
from .context import data_key, names_data
from .rules import Rule, Span, anchored_rule
from .values import (
    COMPOUND,
    account_check,
    codes_value,
    digits_value,
    id_check,
    number_value,
    pair_value,
    passport_value,
    password_before,
    password_value,
    short_password_value,
    token_value,
    totp_value,
    wifi_value,
)
from .vocabulary import (
    ACCESS_TOKEN_STEMS,
    ACCESS_TOKEN_WORDS,
    ACCOUNT_STEMS,
    ACCOUNT_WORDS,
    BACKUP_CODE_STEMS,
    BACKUP_CODE_WORDS,
    CODE_STEMS,
    CODE_WORDS,
    CVV_STEMS,
    CVV_WORDS,
    ID_STEMS,
    ID_WORDS,
    KEY_STEMS,
    KEY_WORDS,
    NOT_A_VALUE,
    PAIR_STEMS,
    PASSPORT_STEMS,
    PASSPORT_WORDS,
    PASSWORD_STEMS,
    PASSWORD_WORDS,
    PIN_STEMS,
    PIN_WORDS,
    SHORT_PASSWORD_STEMS,
    SHORT_PASSWORD_WORDS,
    TOTP_STEMS,
    TOTP_WORDS,
    UPPER_ONLY,
    WIFI_STEMS,
    latin,
)

__all__ = ["RULES"]

PASSWORD = "a password"
PIN = "a PIN"
CVV = "a card security code"
API_KEY = "an API key"
ACCESS_TOKEN = "an access token"
RECOVERY_CODE = "a recovery code"
NATIONAL_ID = "a national id number"
PASSPORT = "a passport number"
ACCOUNT = "a bank account number"

_WORD_START = re.compile(r"(?<![^\W\d_])[^\W\d_]")


def _starts(low: str, p: int) -> list[int]:
    """Where a credential word holding the anchor at ``p`` may start: at ``p``, or at one of the three words before.

    "mot de passe" is found from its anchor "pass", two words in.
    """
    starts = [p]
    lo = max(0, p - 24)
    before = [m.start() for m in _WORD_START.finditer(low, lo, p)]
    starts.extend(reversed(before[-3:]))
    return starts


# Parts of a setting's name that say it holds something about a secret, not the secret.
_NOT_A_SECRET_NAME = COMPOUND | frozenset(
    "hash hashed length len min max regex pattern label validator file path url uri id name type algorithm "
    "algo salt_rounds rounds ttl expires expiry timeout header env var enabled required count size format".split()
)
_IDENTIFIER_TAIL = re.compile(r"[\w.-]*[ \t]*(?=[:=])")


def _word_end(text: str, end: int) -> int:
    """Where the value may start after a credential word, or -1 when the word is part of a name.

    ``api_key_prod = ...`` and ``secret_key_base: ...`` name a credential (the name ends in an
    assignment); ``key_decisions[0].decision`` does not.
    """
    if end < len(text) and text[end] in ",;)]}(":
        return -1  # "password, username and email", "bcrypt(password)", "key)": the word is named, not given
    if end >= len(text) or not (text[end].isascii() and (text[end].isalnum() or text[end] in "_.")):
        return end
    tail = _IDENTIFIER_TAIL.match(text, end)
    if tail is None:
        return -1
    parts = set(re.split(r"[\W_]+", tail.group().lower()))
    return -1 if parts & _NOT_A_SECRET_NAME else tail.end()


def _keyword_rule(
    kind: str,
    words: str,
    stems: tuple[str, ...],
    value: Callable[[str, int], Span | None],
    *,
    before: bool = False,
    plausible: re.Pattern[str] | None = None,
    skip: re.Pattern[str] | None = None,
    data: bool = False,
    more: bool = False,
) -> Rule:
    """A rule that finds one of ``words`` around each stem, then reads its value with ``value``.

    ``plausible``, when given, must match somewhere in the 80 characters after the
    word for the value to be read at all: a cheap test that keeps the per-word
    cost low in a long text that mentions "key" thousands of times. With ``data``, a
    key of a cache or a table ("cache key", "partition key") is no credential word and a
    digest or id named by the words around it is no value (:mod:`.context`). With
    ``more``, further values listed after the first are read too ("the passwords are X and Y").
    """
    pattern = re.compile(words)

    def find(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
        done = -1
        for p in sorted(set(anchors)):
            if p < done:
                continue
            m = pattern.match(low, p)
            for q in [p] if m is not None and m.end() > p else _starts(low, p)[1:]:
                m = pattern.match(low, q) if q != p else m
                if m is None or m.end() <= p:
                    continue
                word = m.group()
                if word.strip(" #.:") in UPPER_ONLY and not text[m.start():m.end()].strip(" #.:").isupper():
                    break
                done = m.end()
                end = _word_end(text, m.end()) if word[-1].isascii() else m.end()
                if end < 0 or (data and data_key(word, low, m.start())):
                    break
                if plausible is not None and not plausible.search(text, end, end + 80):
                    break
                span = value(text, end)
                if span is None and before:
                    span = password_before(text, m.start())
                if span is not None and data and names_data(text, low, word, m.start(), span):
                    span = None
                if span is not None:
                    done = max(done, span[1])
                    yield span
                    while more and span is not None:
                        span = _listed_after(text, span[1])
                        if span is not None:
                            done = max(done, span[1])
                            yield span
                elif skip is not None:
                    run = skip.match(text, m.end())
                    if run is not None:
                        done = max(done, run.end())
                break

    return Rule(kind, find, stems)


# What joins a second value to the first: "X and Y", "X, Y", "X / Y", "X und Y", "X и Y"...
_LIST_JOIN = re.compile(
    r"[ \t]*(?:\([^()\n]{1,30}\)[ \t]*)?(?:(?:[,/&+;]|-(?=[ \t]))[ \t]*)?"
    r"(?:(?:and|und|y|et|e|i|och|og|en|и|ve|dan|oraz|ja|és|a|или|or|oder|o|ou)"
    r"[ \t]+)?(?P<value>[!-~]{6,64})"
)


def _listed_after(text: str, end: int) -> Span | None:
    """A further password listed right after the one ending at ``end``, or None."""
    m = _LIST_JOIN.match(text, end)
    if m is None or m.end() == end:
        return None
    value = m.group("value").rstrip(".,;:\"'`")
    while value.endswith(")") and value.count(")") > value.count("("):
        value = value[:-1].rstrip(".,;:\"'`")  # a bracket the value did not open: "(X and Y)"
    if not password_like(value, min_length=6) or not any(c.isdigit() for c in value):
        return None
    start = m.start("value")
    return start, start + len(value)


def _plain_value(m: re.Match[str]) -> bool:
    value = m.group("value")
    if value.endswith(("[", "(")) or value.startswith(("$(", "`")):
        return False  # read by code ("os.environ[", "config.get(", "$(cat ...)"), not written in it
    return len(value) >= 3 and value.lower() not in NOT_A_VALUE and not is_placeholder(value) and value[0] != "["


_PLAUSIBLE_KEY = re.compile(r"[^\s\"'`]{16}")
# The rest of a key-like run after a key word: when no key is found there, later key words
# inside the same run ("&key=&key=&key=...") are not read again.
_KEY_RUN = re.compile(r"[=:\s]*[^\s\"'`,;{}<>]{16,}")

RULES: tuple[Rule, ...] = (
    anchored_rule(
        PASSWORD,
        [(anchor, 0, anchor + r"[^\n]{0,24}?(?P<value>\b[a-z]{4}([ -]?)[a-z]{4}\2[a-z]{4}\2[a-z]{4}\b)")
         for anchor in ("app password", "app-specific password", "app specific password", "application password",
                        "app-passwort", "contraseña de aplicación", "mot de passe d'application", "senha de app")],
        left=r"[A-Za-z]",
        case_sensitive=False,
        flags=re.IGNORECASE,
    ),
    # Passwords on a command line and in environment variables: PGPASSWORD=..., --password=..., sshpass -p ...
    anchored_rule(
        PASSWORD,
        [*((word, 0, word + r"[A-Z0-9_]*[ \t]*[:=][ \t]*[\"']?(?P<value>(?:[^\s\"'\\]|\\(?![nrt]))+)")
           for word in ("PASSWORD", "PASSWD", "PASSPHRASE", "_PWD", "_PASS")),
         ("--pass", 0, r"--pass(?:word)?[= ][\"']?(?P<value>[^\s\"']+)"),
         ("sshpass", 0, r"sshpass\s+-p\s*[\"']?(?P<value>[^\s\"']+)"),
         ("mysql", 0, r"mysql(?:dump|admin)?\b[^\n]{0,60}?\s-p[\"']?(?P<value>[^\s\"']+)")],
        _plain_value,
        left=None,
    ),
    _keyword_rule(RECOVERY_CODE, BACKUP_CODE_WORDS, BACKUP_CODE_STEMS, codes_value),
    _keyword_rule(RECOVERY_CODE, TOTP_WORDS, TOTP_STEMS, totp_value),
    _keyword_rule(CVV, CVV_WORDS, CVV_STEMS, digits_value(3, 4)),
    _keyword_rule(PIN, PIN_WORDS, PIN_STEMS, digits_value(4, 8)),
    _keyword_rule(PIN, CODE_WORDS, CODE_STEMS, digits_value(3, 8)),
    _keyword_rule(PASSWORD, PASSWORD_WORDS, PASSWORD_STEMS, password_value, before=True, data=True, more=True),
    _keyword_rule(PASSWORD, SHORT_PASSWORD_WORDS, SHORT_PASSWORD_STEMS, short_password_value),
    _keyword_rule(PASSWORD, latin("wi-?fi", "wlan", "ssid", "hotspot", "wireless", "network"), WIFI_STEMS, wifi_value),
    _keyword_rule(PASSWORD, latin("login", "logins", "creds", "credentials", "user(?:name)?", "account", "superuser",
                                  "admin(?:istrator)?", "root"), PAIR_STEMS,
                  pair_value),
    _keyword_rule(ACCESS_TOKEN, ACCESS_TOKEN_WORDS, ACCESS_TOKEN_STEMS, token_value, plausible=_PLAUSIBLE_KEY,
                  skip=_KEY_RUN, data=True),
    _keyword_rule(API_KEY, KEY_WORDS, KEY_STEMS, token_value, plausible=_PLAUSIBLE_KEY, skip=_KEY_RUN, data=True),
    _keyword_rule(PASSPORT, PASSPORT_WORDS, PASSPORT_STEMS, passport_value),
    _keyword_rule(NATIONAL_ID, ID_WORDS, ID_STEMS, number_value(6, id_check)),
    _keyword_rule(ACCOUNT, ACCOUNT_WORDS, ACCOUNT_STEMS, number_value(6, account_check)),
)
