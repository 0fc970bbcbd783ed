"""Reading the value after a credential word: the password, the digits, the key, the id.

Each reader gets the text and where the credential word ends, and returns the span of
the value, or None when what follows is prose about the secret rather than the secret
("the password is required", "my PIN arrives by mail"). They read the *window* after the
word: one clause, at most a few dozen characters, as runs of printable ASCII, so the same
code reads "我的密码是X，", "パスワードはXです" and "mot de passe : X".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from .checks import aba_valid, is_placeholder, looks_random, password_like
from .rules import Span
from .vocabulary import COPULAS, NOT_A_VALUE

__all__ = [
    "COMPOUND",
    "account_check",
    "codes_value",
    "digits_value",
    "id_check",
    "number_value",
    "pair_value",
    "passport_value",
    "password_before",
    "password_value",
    "short_password_value",
    "token_value",
    "totp_value",
    "wifi_value",
]

_TOKEN = re.compile(r"[!-~]+")
_BREAK = re.compile(r"\n|[。！？]")
_LEADING = "\"'`([{<:=："

# Nouns that make "password X" a compound about passwords, not a stated password.
COMPOUND = frozenset(
    """manager managers policy policies reset resets hint hints field fields strength length requirement
    requirements rules rule change changes rotation generator generators vault hash hashes hashing store
    storage prompt dialog screen page form box input protection protected expiry expiration history
    complexity recovery breach leak leaks safe app keeper spraying less-login entry entries attempts
    attempt lockout managed-by gestor gestionnaire verwaltung менеджер tips tip checker list lists""".split()
)
# Words after which a value is introduced ("password FOR the wifi", "mot de passe DU wifi").
_MAX_FILLERS = 5


_OPENER = {")": "(", "]": "[", "}": "{", ">": "<"}


def _strip(tok: str, a: int) -> tuple[str, int, int]:
    """``tok`` without leading separators and trailing punctuation, with its new span.

    A closing bracket stays when the value opened it ("p4ss(1)"); one it did not open goes.
    """
    lead = len(tok) - len(tok.lstrip(_LEADING))
    body = tok[lead:]
    end = len(body)
    while end:
        c = body[end - 1]
        if c in "\"'`.,;:" or (c in _OPENER and body[:end].count(c) > body[:end].count(_OPENER[c])):
            end -= 1
        else:
            break
    return body[:end], a + lead, a + lead + end


_KEY_TOKEN = re.compile(r"[^\s\"'`,;{}<>]+")


def _window(
    text: str, start: int, *, limit: int = 64, newlines: bool = False, tokens: re.Pattern[str] = _TOKEN
) -> Iterator[tuple[str, int, int, str]]:
    """The tokens after a credential word: ``(token, start, end, gap before it)``, until the clause ends."""
    hi = min(len(text), start + limit)
    pos = start
    for m in tokens.finditer(text, start, hi):
        gap = text[pos:m.start()]
        if not newlines and _BREAK.search(gap) and (pos != start or gap.strip(" \t:：=") != ""):
            return
        if not newlines and pos == start and "\n" in gap and gap.count("\n") > 1:
            return
        yield m.group(), m.start(), m.end(), gap
        pos = m.end()


# Linking words written in other scripts, or glued to the word ("비밀번호는", "パスワードは", "密码是").
_COPULA_GAP = re.compile(r"(?:^|\s)(?:é|è|هي|هو|হলো|হল|হচ্ছে|है|ہے|это|—|–)(?:\s|$)|[是为為は는은：]")


def _clause_ends(text: str, raw_end: int, raw: str) -> bool:
    rest = text[raw_end:raw_end + 3]
    return raw[-1] in ".,;!?" or rest.strip() == "" or rest[0] == "\n"


# A value read from code, not written in it: os.environ["DB_PASSWORD"], getpass(), settings.DB_PASS
_CODE_VALUE = re.compile(
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\[\s*[\"'][^\]]*[\"']\s*\]|\(\s*(?:[\"'][^)]*[\"'])?\s*\))[\w.]*"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+[(\[][\"'].*"
    r"|(?:os\.environ|process\.env|settings|config|env|ENV|secrets|self|this)\.[A-Za-z_][\w.]*"
)


def _plain_password(tok: str, low: str) -> bool:
    """A word stated as a password ("banana"), not prose about one ("required", "expiring", "safely")."""
    return (
        len(tok) >= 3
        and low not in NOT_A_VALUE
        and not low.endswith(("ed", "ing", "ly", "able", "ible"))
        and not is_placeholder(tok)
    )


# Words that may follow a password given as a plain word: "password: swordfish for the wifi"
_AFTER_A_WORD = frozenset(
    "for für fur para pour per voor för til do dla od от для на au du del de da dei des zum zur on at in to".split()
)


def _introduces(text: str, end: int) -> bool:
    """What follows a plain word after "password:" says the word was the value: another label
    ("user: bob"), a preposition ("for the wifi"), a bracket or a dash. Prose goes on with words
    ("password: must contain a number", "Passwort: mindestens 12 Zeichen")."""
    m = _TOKEN.search(text, end, end + 40)
    if m is None or "\n" in text[end:m.start()]:
        return True
    nxt = m.group()
    return nxt[-1] in ":=" or nxt[0] in "([{<-–|/" or nxt.lower() in _AFTER_A_WORD


def password_value(text: str, start: int) -> Span | None:
    """The password after a password word, or None when what follows is prose about passwords.

    Up to five words may come between ("for the office wifi", "del correo", "от вайфая").
    A token that reads like a password is taken anywhere in the clause; right after a
    separator (":", "=", "is", "est", "是"...) digits and plain words are taken too,
    plain words only where they end the clause ("is banana." but not "is required").
    """
    sep: str | None = None  # "punct" after ':' or '=', "verb" after "is", "est", "是"...
    fillers = 0
    for raw, a, b, gap in _window(text, start):
        if gap and (":" in gap or "=" in gap or "：" in gap):
            sep = sep or "punct"
        elif gap and not gap.isspace() and _COPULA_GAP.search(gap):
            sep = sep or "verb_other"
        if raw[0] in ":=：":
            sep = sep or "punct"
        tok, s, e = _strip(raw, a)
        if not tok:
            continue
        if _CODE_VALUE.fullmatch(tok):
            return None
        low = tok.lower()
        if low in COPULAS:
            sep = sep or ("verb" if low in ("is", "was") else "verb_other")
            continue
        if tok.isalpha():
            if fillers == 0 and not sep and low in COMPOUND:
                return None
            if sep and _plain_password(tok, low):
                ends = _clause_ends(text, b, raw)
                if (sep == "punct" and (ends or (fillers == 0 and _introduces(text, b)))) or (
                        sep == "verb" and fillers <= 3 and ends):
                    return s, e
            if sep:
                return None
        else:
            if tok.isdigit():
                if (sep or fillers == 0) and 4 <= len(tok) <= 12:
                    return s, e
            elif password_like(tok, min_length=4 if sep else 6):
                return s, e
            elif sep == "punct" and fillers == 0 and len(tok) >= 3 and low not in NOT_A_VALUE \
                    and not is_placeholder(tok) and tok[0] != "[":
                return s, e
            if sep:
                return None
        fillers += 1
        if fillers > _MAX_FILLERS or raw[-1] in ".!?":
            return None
        if raw[-1] in ":=：":
            sep = "punct"  # "contraseña del wifi: X": the separator came with the last word
    return None


_SHORT_SEP = re.compile(r"[ \t]*(?:[:=：]|(?P<verb> (?:is|was) ))[ \t]*")


def short_password_value(text: str, start: int) -> Span | None:
    """``pwd: x`` / ``pass=x``: the value must follow ':' or '=' directly."""
    m = _SHORT_SEP.match(text, start)
    if not m:
        return None
    tok_m = _TOKEN.match(text, m.end())
    if not tok_m:
        return None
    tok, s, e = _strip(tok_m.group(), tok_m.start())
    low = tok.lower()
    if len(tok) < 3 or low in NOT_A_VALUE or is_placeholder(tok) or tok.startswith("["):
        return None
    if m.group("verb") and not password_like(tok, min_length=6):
        return None  # "my bus pass is valid"
    return s, e


def digits_value(lo: int, hi: int) -> Callable[[str, int], Span | None]:
    digits = re.compile(r"\d{%d,%d}[#*]?|\d{1,2}(?:-\d{1,2}){2,3}" % (lo, hi))

    def value(text: str, start: int) -> Span | None:
        sep = False
        fillers = 0
        for raw, a, _b, gap in _window(text, start, limit=48):
            tok, s, e = _strip(raw, a)
            if ":" in gap or "=" in gap or _COPULA_GAP.search(gap):
                sep = True
            if not tok or tok.lower() in COPULAS:
                sep = True
                continue
            if digits.fullmatch(tok):
                return s, e
            if sep or fillers >= 4:
                return None
            fillers += 1
        return None

    return value


# Words right after a key word that say the value is about the key, not the key:
# "key fingerprint is SHA256:...", "token hash 8a10...", "key id ABCD..."
_ABOUT_THE_KEY = frozenset(
    "fingerprint fingerprints hash hashes hashed digest checksum id ids name names type size length format version "
    "prefix suffix rotation policy path file location filename pair pairs".split()
)
# A public key follows its algorithm's name: "ssh-ed25519 AAAAC3...", "ecdsa-sha2-nistp256 AAAA..."
_PUBLIC_KEY_TYPE = re.compile(r"(?:sk-)?(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d+)(?:@openssh\.com)?")
# "uploads/3f9c....png", "sha256:9f86...": a file path or a labelled digest, not a key
_NOT_A_KEY = re.compile(r"[\w.-]+(?:/[\w.-]+)+\.[A-Za-z][A-Za-z0-9]{0,4}|(?i:sha\d*|md5|blake2\w*)[:=-].*")


def token_value(text: str, start: int) -> Span | None:
    seen = 0
    for raw, a, _b, _gap in _window(text, start, limit=80, tokens=_KEY_TOKEN):
        tok, s, e = _strip(raw, a)
        if not tok:
            continue
        if (seen == 0 and tok.lower() in _ABOUT_THE_KEY) or _PUBLIC_KEY_TYPE.fullmatch(tok):
            return None
        if len(tok) >= 16 and not tok.isalpha() and "://" not in tok and looks_random(tok):
            return None if _NOT_A_KEY.fullmatch(tok) else (s, e)
        seen += 1
        if seen > 5:
            return None
    return None


_CODE = re.compile(r"(?=[A-Za-z0-9-]*\d)[A-Za-z0-9]{4,12}(?:-[A-Za-z0-9]{4,12})?|[A-Z0-9]{4}(?:-[A-Z0-9]{4}){3,}")
_NUMBERING = re.compile(r"\d{1,2}[.)]")


def codes_value(text: str, start: int) -> Span | None:
    """A run of one-time codes after "backup codes": "4829 1038 5521 0932", "77cdf-b319f\\n40f28-9acf4"."""
    first = last = -1
    skipped = 0
    for raw, a, _b, gap in _window(text, start, limit=600, newlines=True):
        if first >= 0 and ("\n\n" in gap):
            break
        tok, s, e = _strip(raw, a)
        if not tok or (_NUMBERING.fullmatch(raw) and first >= 0):
            continue
        if _CODE.fullmatch(tok):
            first = s if first < 0 else first
            last = e
            continue
        if first >= 0:
            break
        skipped += 1
        if skipped > 4:
            return None
    return (first, last) if first >= 0 else None


_BASE32 = re.compile(r"(?i)(?:[A-Z2-7]{4} ){3,}[A-Z2-7]{4}(?![A-Z0-9])|[A-Z2-7]{16,}=*(?![A-Z0-9])")


def totp_value(text: str, start: int) -> Span | None:
    seen = 0
    for raw, a, _b, _gap in _window(text, start, limit=96):
        tok, s, _e = _strip(raw, a)
        if not tok:
            continue
        m = _BASE32.match(text, s)
        if m and not is_placeholder(m.group()) and (any(c.isdigit() for c in m.group()) or m.group().isupper()):
            return m.span()
        seen += 1
        if seen > 4:
            return None
    return None


_NUMBER = re.compile(r"[A-Z]?\d(?:[ .-]?\d){5,24}(?:-?[A-Z](?![A-Za-z]))?")
_SSN = re.compile(r"(\d{3})([- ]?)(\d{2})\2(\d{4})")


def number_value(min_digits: int, check: Callable[[str], bool] | None = None) -> Callable[[str, int], Span | None]:
    """A number (digits, maybe with separators and a check letter) among the first words after an id word."""

    def value(text: str, start: int) -> Span | None:
        seen = 0
        for raw, a, _b, _gap in _window(text, start, limit=56):
            tok, s, _e = _strip(raw, a)
            if not tok:
                continue
            m = _NUMBER.match(text, s)
            if m:
                number = m.group().rstrip(" .-")
                digits = sum(c.isdigit() for c in number)
                if digits >= min_digits and (check is None or check(number)):
                    return s, s + len(number)
            seen += 1
            if seen > 4:
                return None
        return None

    return value


def id_check(number: str) -> bool:
    """A US SSN-shaped id must not be in a never-issued range (area 000, 666, 9xx; group 00; serial 0000)."""
    m = _SSN.fullmatch(number)
    if m:
        area, group, serial = m.group(1), m.group(3), m.group(4)
        return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
    return not re.fullmatch(r"(?:19|20)\d\d[-./]\d\d[-./]\d\d|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}", number)


def account_check(number: str) -> bool:
    digits = re.sub(r"\D", "", number)
    return len(digits) != 9 or aba_valid(digits) or not digits.startswith("0")


def passport_value(text: str, start: int) -> Span | None:
    seen = 0
    for raw, a, _b, _gap in _window(text, start, limit=48):
        tok, s, e = _strip(raw, a)
        if not tok:
            continue
        if re.fullmatch(r"[A-Z0-9]{6,9}", tok) and sum(c.isdigit() for c in tok) >= 5:
            return s, e
        seen += 1
        if seen > 3:
            return None
    return None


_PAIR = re.compile(r"\s*(?:[:=]|\bis\b|\bare\b)?\s*[\w.@+-]{2,40}\s?/\s?(?P<value>[^\s/()\[\]{}]{4,64})")


def pair_value(text: str, start: int) -> Span | None:
    """``login admin / X``, ``creds are admin/X``: a user name, a slash, and a password right after the word."""
    m = _PAIR.match(text, start)
    if m is None:
        return None
    tok, s, e = _strip(m.group("value"), m.start("value"))
    return (s, e) if password_like(tok, min_length=4) else None


_WIFI_KEY = frozenset("key pass pw pwd psk code password passwort clave senha mdp passphrase wpa wpa2 wpa3".split())


def wifi_value(text: str, start: int) -> Span | None:
    """``WiFi: HomeNet-5G, key X``, ``guest wi-fi pass is X``: a key word among the next words, then the value."""
    seen = 0
    keyed = False
    for raw, a, _b, _gap in _window(text, start, limit=64):
        tok, s, e = _strip(raw, a)
        low = tok.lower()
        if not tok or low in COPULAS:
            continue
        if keyed:
            return (s, e) if password_like(tok, min_length=4) or (tok.isdigit() and len(tok) >= 8) else None
        if low in _WIFI_KEY:
            keyed = True
            continue
        seen += 1
        if seen > 4:
            return None
    return None


# "I use X as my password", "X is my password", "X es mi contraseña".
_BEFORE_VERBS = frozenset("is was es est ist é è era".split())
_BEFORE_FOR = frozenset("as for como comme als".split())
_USE_VERBS = frozenset(
    "use uses used using set sets chose picked choose chooses uso usa utilise utilisé nutze nutzt benutze usei usamos"
    .split()
)
_DETERMINERS = frozenset("my the our his her their a mi mon ma mein meine minha meu la le el das die o".split())


def password_before(text: str, word_start: int) -> Span | None:
    """The value stated *before* a password word: "{X} is my wifi password", "I use {X} as my password"."""
    lo = max(0, word_start - 100)
    head_start = text.rfind("\n", lo, word_start) + 1 or lo
    head = text[head_start:word_start]
    words = head.split()
    for k in range(1, min(6, len(words))):
        verb = words[-k].lower()
        between = words[len(words) - k + 1:]
        if verb not in _BEFORE_VERBS and verb not in _BEFORE_FOR:
            continue
        if len(between) > 4 or any(not w.isalpha() for w in between):
            return None
        if between and between[0].lower() not in _DETERMINERS and len(between) > 2:
            return None
        if len(words) <= k:
            return None
        raw = words[-k - 1]
        if verb in _BEFORE_FOR and not (len(words) > k + 1 and words[-k - 2].lower() in _USE_VERBS):
            return None
        pos = head.rfind(raw, 0, len(head) - len(" ".join(words[-k:])))
        if pos < 0:
            return None
        tok, s, e = _strip(raw, head_start + pos)
        if not tok or tok.lower() in NOT_A_VALUE or is_placeholder(tok):
            return None
        if password_like(tok, min_length=4) or (tok.isalpha() and len(tok) >= 5 and not tok[0].isupper()) or (
            tok.isdigit() and len(tok) >= 4
        ):
            return s, e
        return None
    return None
