"""Secrets that carry their own shape: vendor prefixes, key blocks, URLs with credentials.

These need no word nearby: ``ghp_`` followed by 36 characters is a GitHub token
wherever it stands. Prefixes are the ones each vendor documents; where a prefix
is short (``sk-``, ``SK``) the rest of the token must also look random or have
the exact length and alphabet. Ordered from most to least specific, so a JWT
sent as ``Bearer eyJ...`` is named a JWT.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Sequence
from urllib.parse import unquote

from .checks import is_placeholder, looks_random, private_der
from .rules import Rule, Span, anchored_rule, regex_rule
from .seeds import find_seed_phrases

__all__ = ["API_KEY", "ACCESS_TOKEN", "PRIVATE_KEY", "RECOVERY_CODE", "RULES", "SEED_PHRASE", "WEBHOOK_URL"]

PRIVATE_KEY = "a private key"
JWT = "a JWT"
DB_URL = "a database URL with a password"
URL_PASSWORD = "a URL with a password"
WEBHOOK_URL = "a webhook URL"
API_KEY = "an API key"
ACCESS_TOKEN = "an access token"
AWS_KEY_ID = "an AWS access key id"
AWS_SECRET = "an AWS secret key"
SEED_PHRASE = "a wallet seed phrase"
RECOVERY_CODE = "a recovery code"

_END = r"(?![A-Za-z0-9_-])"  # a token ends where its alphabet ends
_B58 = "1-9A-HJ-NP-Za-km-z"


def _value_random(m: re.Match[str]) -> bool:
    return looks_random(m.group("value"))


# Words written where a URL's password goes in documentation: "postgres://user:pass@host".
_URL_PLACEHOLDERS = frozenset("pass password passwd pwd pw secret pass123 xxx xxxx yourpassword mypassword".split())


def _url_value(m: re.Match[str]) -> bool:
    value = m.group("value")
    return (
        bool(value)
        and value.lower() not in _URL_PLACEHOLDERS
        and not is_placeholder(unquote(value))
        and not value.startswith("[")
    )


def _random_unquoted(m: re.Match[str]) -> bool:
    return looks_random(unquote(m.group("value")), min_length=12)


def _basic_credentials(m: re.Match[str]) -> bool:
    """``Basic <base64 of user:password>``: it must decode to text with a colon in it."""
    value = m.group("value")
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return ":" in raw and raw.isprintable()


def _authorization(m: re.Match[str]) -> bool:
    return _basic_credentials(m) if (m.group("scheme") or "").lower() == "basic" else _value_random(m)


def _der(m: re.Match[str]) -> bool:
    return private_der(m.group(0))


# A key file encoded once more in base64 (a Kubernetes secret's ``tls.key``, ``base64 key.pem``):
# "-----BEGIN" encodes to "LS0tLS1CRUdJTi", and the lines may be wrapped, raw or escaped.
_B64_PEM = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}(?:[ \t]*(?:\r?\n|\\+[rn])+[ \t]*[A-Za-z0-9+/]+={0,2})*")
_B64_CHAR = re.compile(r"[A-Za-z0-9+/=]")
_B64_RUN = re.compile(r"[A-Za-z0-9+/]*")
_PEM_PRIVATE = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY")
_PEM_END = re.compile(rb"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")


def _base64_pem(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
    """A private key file in base64, up to the end of its END line (a certificate is left alone)."""
    done = -1
    for p in anchors:
        if p < done or (p and (text[p - 1].isalnum() or text[p - 1] in "+/")):
            continue  # inside a run already read, or inside another token
        m = _B64_PEM.match(text, p)
        if m is None:
            continue
        done = m.end()
        run = _B64_RUN.match(text, p, p + 64)  # the start of the first line: is it a private key?
        first = run.group() if run else ""
        try:
            head = base64.b64decode(first[:len(first) // 4 * 4])
        except (binascii.Error, ValueError):
            continue
        if _PEM_PRIVATE.match(head) is None:
            continue
        chars = [(c.start(), c.group()) for c in _B64_CHAR.finditer(text, m.start(), m.end())]
        encoded = "".join(c for _, c in chars)
        try:
            raw = base64.b64decode(encoded[:len(encoded) // 4 * 4])
        except (binascii.Error, ValueError):
            continue
        end = _PEM_END.search(raw)
        if end is None:
            yield m.span()
            continue
        used = min(len(chars), -(-end.end() // 3) * 4)  # base64 characters that encode the key
        while used < len(chars) and chars[used][1] == "=":
            used += 1
        stop = chars[used - 1][0] + 1
        while stop < m.end() and _B64_CHAR.match(text, stop):
            stop += 1  # the rest of that line's run: the encoded line break after END
        yield m.start(), stop


# A PuTTY key file: the private part is the base64 after "Private-Lines: N", then its MAC.
_PUTTY_PRIVATE = r"Private-Lines:\s*\d+(?:\s|\\+[rn])+(?P<value>[A-Za-z0-9+/=]+(?:(?:\s|\\+[rn])+(?!Private-)[A-Za-z0-9+/=]+)*(?:(?:\s|\\+[rn])+Private-(?:MAC|Hash):\s*[0-9a-fA-F]+)?)"


_DB_SCHEMES = (
    r"(?:postgres(?:ql)?|mysql|mariadb|mssql|sqlserver|oracle|mongodb(?:\+srv)?|rediss?|amqps?|clickhouse"
    r"|cockroachdb|neo4j(?:\+s)?|bolt|couchdb|cassandra|elasticsearch|influxdb|memcached|snowflake)"
)

# (anchor, characters before the anchor where the token starts, pattern of the whole token)
_VENDOR_KEYS: tuple[tuple[str, int, str], ...] = (
    # AI and model hubs
    ("sk-", 0, r"sk-(?:proj-|ant-(?:api|admin)\d\d-|svcacct-|admin-|or-v1-|None-)?(?P<body>[A-Za-z0-9_-]{20,})"),
    ("AIza", 0, r"AIza[0-9A-Za-z_-]{35}"),
    ("hf_", 0, r"hf_[A-Za-z]{30,}"), ("api_org_", 0, r"api_org_[A-Za-z]{30,}"), ("gsk_", 0, r"gsk_[A-Za-z0-9]{40,}"),
    ("r8_", 0, r"r8_[A-Za-z0-9]{30,}"), ("pplx-", 0, r"pplx-[A-Za-z0-9]{40,}"), ("xai-", 0, r"xai-[A-Za-z0-9]{50,}"),
    ("nvapi-", 0, r"nvapi-[A-Za-z0-9_-]{40,}"),
    # payments
    ("sk_", 0, r"sk_(?:live|test)_[0-9A-Za-z]{16,}"), ("rk_", 0, r"rk_(?:live|test)_[0-9A-Za-z]{16,}"),
    ("whsec_", 0, r"whsec_[A-Za-z0-9+/=]{24,}"), ("sq0", 0, r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}"),
    ("EAAA", 0, r"EAAA[A-Za-z0-9_-]{60,}"), ("rzp_", 0, r"rzp_(?:live|test)_[A-Za-z0-9]{14,}"),
    ("FLWSECK", 0, r"FLWSECK(?:_TEST)?-[a-fA-F0-9]{32}-X"), ("shp", 0, r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    ("access_token$", 0, r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}"),
    # mail, messaging
    ("SG.", 0, r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), ("key-", 0, r"key-[0-9a-f]{32}"),
    ("-us", 32, r"[0-9a-f]{32}-us\d{1,2}"), ("AC", 0, r"AC[0-9a-f]{32}"), ("SK", 0, r"SK[0-9a-f]{32}"),
    ("xkeysib-", 0, r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    # cloud and infrastructure
    ("GOCSPX-", 0, r"GOCSPX-[A-Za-z0-9_-]{20,}"), ("_v1_", 3, r"do[opr]_v1_[a-f0-9]{64}"),
    ("dckr_pat_", 0, r"dckr_pat_[A-Za-z0-9_-]{27,}"), ("sbp_", 0, r"sbp_[a-f0-9]{40}"),
    ("dapi", 0, r"dapi[a-f0-9]{32}(?:-\d)?"), ("pscale_", 0, r"pscale_(?:pw|tkn|oauth)_[A-Za-z0-9_.-]{32,}"),
    ("fo1_", 0, r"fo1_[A-Za-z0-9_-]{40,}"), ("rnd_", 0, r"rnd_[A-Za-z0-9]{32,}"), ("pul-", 0, r"pul-[a-f0-9]{40}"),
    (".atlasv1.", 14, r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}"), ("AKCp", 0, r"AKCp[A-Za-z0-9]{60,}"),
    ("dt0c01.", 0, r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"), ("HRKU-", 0, r"HRKU-[A-Za-z0-9_-]{30,}"),
    ("Q~", 4, r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    # productivity and observability
    ("secret_", 0, r"secret_[A-Za-z0-9]{43}"), ("ntn_", 0, r"ntn_[A-Za-z0-9]{40,}"),
    ("lin_api_", 0, r"lin_api_[A-Za-z0-9]{40}"), ("ATATT3", 0, r"ATATT3[A-Za-z0-9_=-]{50,}"),
    ("NRAK-", 0, r"NRAK-[A-Z0-9]{27}"), ("PMAK-", 0, r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}"),
    ("glsa_", 0, r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}"), ("glc_", 0, r"glc_[A-Za-z0-9+/=]{32,}"),
    ("dp.", 0, r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"), ("figd_", 0, r"figd_[A-Za-z0-9_-]{40,}"),
    ("sntry", 0, r"sntry[su]_[A-Za-z0-9+/=_]{40,}"), ("CFPAT-", 0, r"CFPAT-[A-Za-z0-9_-]{43}"),
    ("ATBB", 0, r"ATBB[A-Za-z0-9_=.-]{32,}"), ("EAA", 0, r"EAA[B-Z][A-Za-z0-9]{80,}"),
    ("sk.eyJ", 0, r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
)

_VENDOR_TOKENS: tuple[tuple[str, int, str], ...] = (
    ("gh", 0, r"gh[pousr]_[A-Za-z0-9]{30,}"), ("github_pat_", 0, r"github_pat_[A-Za-z0-9_]{22,}"),
    ("gl", 0, r"gl(?:pat|dt|rt|ptt|ft|soat|cbt)-[A-Za-z0-9_-]{20,}"),
    ("npm_", 0, r"npm_[A-Za-z0-9]{36}"), ("pypi-AgE", 0, r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    ("xox", 0, r"xox[abprseo]-[A-Za-z0-9-]{10,}"), ("xapp-", 0, r"xapp-\d-[A-Za-z0-9-]{20,}"),
    ("hv", 0, r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("tskey-", 0, r"tskey-(?:auth|api|client|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}"),
    ("ya29.", 0, r"ya29\.[0-9A-Za-z_-]{30,}"), ("1//0", 0, r"1//0[0-9A-Za-z_-]{30,}"),
)
# Telegram bot: numeric bot id, a colon, 35 characters starting "AA".
_TELEGRAM = r"(?<![\w:])\d{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"
# Discord bot: base64 of the numeric id, a 6-character timestamp, an HMAC.
_DISCORD = r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])"


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+.-")
_DB_SCHEME = re.compile(rf"(?:jdbc:)?{_DB_SCHEMES}(?:\+\w+)?")
_URL_AUTH = re.compile(r"://[^\s:/@]*:(?P<value>[^\s@/]+)@[^\s/]+")


def _urls(text: str, low: str, anchors: Sequence[int], *, database: bool) -> Iterator[Span]:
    """Passwords in URLs (``scheme://user:password@host``, the user may be empty), found from each "://"."""
    for p in anchors:
        m = _URL_AUTH.match(text, p)
        if m is None or not _url_value(m):
            continue
        start = p
        while start > 0 and p - start < 40 and low[start - 1] in _SCHEME_CHARS:
            start -= 1
        if start > 4 and low[start - 5:start] == "jdbc:":
            start -= 5
        scheme = low[start:p]
        if not scheme or not scheme[0].isalpha():
            continue
        if (_DB_SCHEME.fullmatch(scheme) is not None) is database:
            yield m.span("value")


def _ends_token(variants: tuple[tuple[str, int, str], ...]) -> tuple[tuple[str, int, str], ...]:
    return tuple((a, o, p + _END) for a, o, p in variants)


def _vendor_key_check(m: re.Match[str]) -> bool:
    body = m.groupdict().get("body")
    return body is None or looks_random(body)


def _anchored(kind: str, anchor: str, pattern: str, check=None, *, back: int = 0, left: str | None = None,
              flags: int = re.IGNORECASE) -> Rule:
    """A pattern that starts ``back`` characters before a case-insensitive anchor word."""
    return anchored_rule(kind, [(anchor, back, pattern)], check, left=left, case_sensitive=False, flags=flags)


RULES: tuple[Rule, ...] = (
    anchored_rule(
        PRIVATE_KEY,
        [("-----BEGIN ", 0,
          r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
          r"(?:\s*(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset):[^\n\\]*)*"
          r"(?:[A-Za-z0-9+/=\s]|[\"'][ \t]*\+?[ \t]*\r?\n[ \t]*\+?[ \t]*[\"'])*"
          r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?")],
        left=None,
        case_sensitive=False,
        flags=re.IGNORECASE,
    ),
    Rule(PRIVATE_KEY, _base64_pem, ("LS0tLS1CRUdJTi",), case_sensitive=True),
    anchored_rule(PRIVATE_KEY, [("Private-Lines:", 0, _PUTTY_PRIVATE)], left=None),
    regex_rule(PRIVATE_KEY, r"b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=]*", left=r"[A-Za-z0-9+/]"),
    regex_rule(PRIVATE_KEY, r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}"),
    regex_rule(
        PRIVATE_KEY,
        rf"(?:5[HJK][{_B58}]{{49}}|[KL][{_B58}]{{51}}|[xt]prv[{_B58}]{{107,108}})(?![A-Za-z0-9])",
        left=r"[A-Za-z0-9]",
    ),
    # a bare key body, with the lines that follow it when they are base64 and nothing else
    regex_rule(PRIVATE_KEY, r"M[A-Za-z0-9+/]{60,}={0,2}(?:[ \t]*\r?\n[ \t]*(?:[A-Za-z0-9+/]{16,}={0,2}|"
                            r"[A-Za-z0-9+/]{2,}={1,2})(?=[ \t]*(?:\r?\n|\Z)))*", _der, left=r"[A-Za-z0-9+/]"),
    regex_rule(JWT, r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*", left=r"[A-Za-z0-9_-]"),
    Rule(SEED_PHRASE, lambda text, low, anchors: find_seed_phrases(text, low)),
    anchored_rule(
        WEBHOOK_URL,
        [("hooks.slack.com/", 8, r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}"),
         ("discord", 8, r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{30,}"),
         ("discord", 12, r"https://(?:ptb\.|canary\.)discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{30,}"),
         ("hooks.zapier.com/", 8, r"https://hooks\.zapier\.com/hooks/catch/[^\s\"'<>]+"),
         ("chat.googleapis.com/", 8, r"https://chat\.googleapis\.com/v1/spaces/[^\s\"'<>]*key=[^\s\"'<>]+")],
        left=None,
        case_sensitive=False,
    ),
    regex_rule(WEBHOOK_URL, r"https://[\w.-]*webhook\.office\.com/webhookb2/[^\s\"'<>]+", hints=("webhook.office",)),
    Rule(DB_URL, lambda text, low, anchors: _urls(text, low, anchors, database=True), ("://",)),
    Rule(URL_PASSWORD, lambda text, low, anchors: _urls(text, low, anchors, database=False), ("://",)),
    regex_rule(
        RECOVERY_CODE,
        r"(?i)otpauth://[^\s?]*\?(?:[^\s#]*?&)?secret=(?P<value>[A-Z2-7=]{8,})",
        hints=("otpauth://",),
    ),
    anchored_rule(API_KEY, _ends_token(_VENDOR_KEYS), _vendor_key_check),
    anchored_rule(ACCESS_TOKEN, _ends_token(_VENDOR_TOKENS)),
    anchored_rule(ACCESS_TOKEN, [(":AA", 10, _TELEGRAM), (":AA", 9, _TELEGRAM), (":AA", 8, _TELEGRAM)], left=None),
    regex_rule(ACCESS_TOKEN, _DISCORD, left=r"[A-Za-z0-9_-]", hints=(".",)),
    anchored_rule(
        AWS_KEY_ID,
        [(p, 0, p + r"[A-Z0-9]{16}\b") for p in ("AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA", "ANVA", "AIPA")],
        left=r"\w",
    ),
    *(_anchored(AWS_SECRET, word, word + r"(?![a-z]).{0,40}?(?<![A-Za-z0-9/+])(?P<value>[A-Za-z0-9/+]{40})"
                r"(?![A-Za-z0-9/+=])", _value_random, left=r"[A-Za-z]") for word in ("aws", "amazon")),
    # Connection strings: Azure storage and service bus keys, shared access signatures.
    *(_anchored(API_KEY, word, word + r"\s*=\s*(?P<value>[A-Za-z0-9+/]{20,}={0,2})", left=None)
      for word in ("AccountKey", "SharedAccessKey", "SharedSecret", "PrimaryKey")),
    _anchored(ACCESS_TOKEN, "SharedAccessSignature", r"SharedAccessSignature\s*=\s*(?P<value>[^\s;\"'<>]{16,})",
              left=None),
    _anchored(ACCESS_TOKEN, "sig=", r"[?&;]sig=(?P<value>[^\s;&\"'<>]{16,})", back=1, left=None),
    regex_rule(
        ACCESS_TOKEN,
        r"[?&](?i:access_token|token|api_?key|apikey|key|secret|client_secret|signature|auth|code_verifier)"
        r"=(?P<value>[^\s&#\"'<>]{12,})",
        _random_unquoted,
        hints=("=",),
    ),
    # Authorization headers, in any case: "Authorization: Bearer ...", "authorization: basic ...".
    _anchored(
        ACCESS_TOKEN,
        "authorization",
        r"authorization\s*[:=]\s*[\"']?(?:(?P<scheme>bearer|basic|token|bot|apikey|sso-key|digest)\s+)?"
        r"(?P<value>[A-Za-z0-9_\-.~+/=:]{12,})",
        _authorization,
        left=r"[A-Za-z]",
    ),
    _anchored(ACCESS_TOKEN, "bearer", r"bearer\s+(?P<value>[A-Za-z0-9_\-.~+/]{16,}=*)", _value_random, left=r"\w"),
    _anchored(ACCESS_TOKEN, "basic", r"basic\s+(?P<value>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
              _basic_credentials, left=r"\w"),
    regex_rule(RECOVERY_CODE, r"\d{6}(?:-\d{6}){7}(?![\d-])", left=r"[\d-]", hints=("-",)),
    regex_rule(RECOVERY_CODE, r"A3-[A-Z0-9]{6}-[A-Z0-9]{5,6}-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\b",
               left=r"\w"),
)
