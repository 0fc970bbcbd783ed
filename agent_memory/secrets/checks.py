"""Pure checks on one candidate value: checksums, randomness, and "is this a password?".

A pattern finds where a secret could be; these decide whether it is one. Check
digits turn "16 digits" into "a card" (Luhn) or "an IBAN" (mod 97) at one false
positive in ten or in a hundred; randomness tells ``token: 9fQ2...`` from
``token: your_token_here``. Every function is pure and fast: they run on each
candidate of every text that is saved.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

__all__ = [
    "aadhaar_valid",
    "aba_valid",
    "china_id_valid",
    "cpf_valid",
    "dni_valid",
    "entropy",
    "iban_valid",
    "is_placeholder",
    "looks_random",
    "luhn_valid",
    "password_like",
    "private_der",
]


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
    if not (15 <= len(s) <= 34) or not s.isascii() or not s.isalnum() or not s[:2].isalpha() or not s[2:4].isdigit():
        return False
    return int("".join(str(int(c, 36)) for c in s[4:] + s[:4])) % 97 == 1


def dni_valid(number: str, letter: str) -> bool:
    """Spanish DNI: the letter is ``"TRWAGMYFPDXBNJZSQVHLCKE"[number % 23]``."""
    return "TRWAGMYFPDXBNJZSQVHLCKE"[int(number) % 23] == letter.upper()


def cpf_valid(cpf: str) -> bool:
    """Brazil's CPF: two mod-11 check digits over nine digits (all-equal numbers are invalid)."""
    d = [int(c) for c in cpf if c.isdigit()]
    if len(d) != 11 or len(set(d)) == 1:
        return False
    for n in (9, 10):
        if sum(x * w for x, w in zip(d[:n], range(n + 1, 1, -1))) * 10 % 11 % 10 != d[n]:
            return False
    return True


_VD = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 0, 6, 7, 8, 9, 5), (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7), (4, 0, 1, 2, 3, 9, 5, 6, 7, 8), (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2), (7, 6, 5, 9, 8, 2, 1, 0, 4, 3), (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)
_VP = ((0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 5, 7, 6, 2, 8, 3, 0, 9, 4), (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
       (8, 9, 1, 6, 0, 4, 3, 5, 2, 7), (9, 4, 5, 3, 1, 2, 6, 8, 7, 0), (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
       (2, 7, 9, 3, 8, 0, 6, 4, 1, 5), (7, 0, 4, 6, 9, 1, 3, 2, 5, 8))


def aadhaar_valid(number: str) -> bool:
    """India's Aadhaar: 12 digits, not starting with 0 or 1, Verhoeff check digit last."""
    d = [int(c) for c in number if c.isdigit()]
    if len(d) != 12 or d[0] < 2:
        return False
    c = 0
    for i, x in enumerate(reversed(d)):
        c = _VD[c][_VP[i % 8][x]]
    return c == 0


def china_id_valid(number: str) -> bool:
    """China's resident id: 17 digits (with a birth date) and an ISO 7064 mod 11-2 check character."""
    s = number.upper()
    if len(s) != 18 or not s[:17].isdigit() or not (s[17].isdigit() or s[17] == "X"):
        return False
    year, month, day = int(s[6:10]), int(s[10:12]), int(s[12:14])
    if not (1900 <= year <= 2099 and 1 <= month <= 12 and 1 <= day <= 31):
        return False
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(c) * w for c, w in zip(s, weights)) % 11] == s[17]


def aba_valid(number: str) -> bool:
    """A US bank routing number (ABA): 9 digits, weights 3-7-1, sum divisible by 10."""
    d = [int(c) for c in number if c.isdigit()]
    return len(d) == 9 and sum(x * w for x, w in zip(d, (3, 7, 1) * 3)) % 10 == 0


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


_HEX = re.compile(r"[0-9a-fA-F]+")
_KEY_RUN = re.compile(r"[A-Za-z0-9+/=_~-]+")


def looks_random(value: str, *, min_length: int = 16) -> bool:
    """True for key-like values: long, letters mixed with digits, high entropy, not a word pattern.

    Keeps ``token: your_api_key_here`` or ``api_key = <YOUR KEY>`` (placeholders,
    all letters) and ``token is valid`` from being taken for a real credential.
    Hex needs 32 characters (an md5-sized key) since shorter hex is mostly ids.
    """
    if len(value) < min_length or value.isalpha() or value.isdigit():
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        # a long base32/base64 value can lack digits by chance: accept it on mixed case and length
        if not (len(value) >= 24 and not value.islower() and not value.isupper()):
            return False
    if len(value) < 32 and _HEX.fullmatch(value):
        return False
    run = max(map(len, _KEY_RUN.findall(value)), default=0)
    if run < 10 or (run < 24 and not any(c.isdigit() for c in value)):
        return False  # code ("str(pc[1].winner.id)") or prose, not a key: keys are long runs of one alphabet
    return entropy(value) >= 3.0 and not is_placeholder(value)


_PLACEHOLDER_WHOLE = re.compile(
    r"[*x•.#_-]{3,}|(?:sk|pk|rk)[_-](?:live|test)?[_-]?\.{3}"
    r"|[a-z_-]{0,20}(?:your|my|the)[_-]?[a-z_-]{0,20}(?:key|token|secret|password|pass|pwd|here)[a-z_-]{0,20}",
    re.IGNORECASE,
)
_PLACEHOLDER_PART = re.compile(r"<[^>]*>|\$\{[^}]*\}|\{\{|%\(\w+\)s|^\$[A-Z_][A-Z0-9_]*$|xxxxx|\.\.\.$")
# Words that make a short or digit-free value a stand-in; a long random key may contain one by chance
# (AWS's documented example key ends in "EXAMPLEKEY" and is still shaped like a real one).
_PLACEHOLDER_WORD = re.compile(r"example|placeholder|changeme|change[_-]me|redacted|dummy", re.IGNORECASE)


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: ``***``, ``${DB_PASSWORD}``, ``<KEY>``, ``sk-...``."""
    return (
        bool(_PLACEHOLDER_WHOLE.fullmatch(value))
        or _PLACEHOLDER_PART.search(value) is not None
        or ((len(value) < 24 or not any(c.isdigit() for c in value)) and _PLACEHOLDER_WORD.search(value) is not None)
        or value.lower().startswith("[withheld")
    )


# Tokens with letters and digits that are words of the trade, not passwords.
_TECH = re.compile(
    r"(?i)(?:sha\d*|md\d|base\d+|utf-?\d+|x86(?:_64)?|arm64|aarch64|amd64|aes-?\d+|rsa-?\d+|ed25519|"
    r"argon2\w*|pbkdf2\w*|bcrypt|scrypt|ipv[46]|wpa\d?|wpa\d-\w+|win\d+|python\d[\d.]*|py\d+|"
    r"ubuntu[\d.]*|debian\d*|ios\d+|android\d+|covid-?19|h\d{3}|mp[34]|\d+(?:st|nd|rd|th)|"
    r"\d+[kmgt]b?|\d+(?:px|ms|gb|mb|kb|hz|ghz|mhz|am|pm|h|min|s|x|%))"
)
_SYMBOL = re.compile(r"[!@#$%^&*?~+=|\\;<>(){}\[\]/]")
_DATE_OR_NUMBER = re.compile(r"[\d.,:/+-]+")


def password_like(value: str, *, min_length: int = 6) -> bool:
    """A token that reads like a chosen password: letters with digits or symbols.

    Not a date, a path, a url, an e-mail address or a word of the trade ("sha256").

    Used where the credential word is near but the value is not right after it
    ("la contraseña del correo: X", "пароль от вайфая X"), so it has to be
    stricter than a value after "password:".
    """
    if len(value) < min_length or len(value) > 128 or value.isalpha() or is_placeholder(value):
        return False
    if "://" in value or value.startswith(("/", "~/", "./", "www.")) or re.fullmatch(r"[\w.+-]+@[\w-]+\.[\w.]+", value):
        return False
    if _DATE_OR_NUMBER.fullmatch(value) or _TECH.fullmatch(value):
        return False
    has_letter = any(c.isalpha() for c in value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = bool(_SYMBOL.search(value))
    return (has_letter and (has_digit or has_symbol)) or (has_digit and has_symbol)


def private_der(blob: str) -> bool:
    """A base64 blob that decodes to a DER private key: SEQUENCE, then INTEGER 0 or 1 (PKCS#1, PKCS#8, SEC1).

    A certificate or a public key (also ``MII...``) starts with a nested SEQUENCE
    instead, so a pasted certificate is not taken for a key.
    """
    head = blob[:24]
    try:
        raw = base64.b64decode(head + "=" * (-len(head) % 4))
    except (binascii.Error, ValueError):
        return False
    if len(raw) < 7 or raw[0] != 0x30:
        return False
    i = 2 if raw[1] < 0x80 else 2 + (raw[1] & 0x7F)
    return raw[i:i + 2] == b"\x02\x01" and raw[i + 2] in (0, 1)
