"""Numbers that identify a person or an account: payment cards, IBANs, national ids.

A run of digits alone is rarely enough: 16-digit order numbers pass Luhn one time
in ten and US part numbers share the SSN's ``NNN-NN-NNNN`` shape. So a number
is a card only with a check digit *and* either a card word nearby ("card",
"Visa", "tarjeta", "карта", "卡号"...) or a card's printed form (four groups) with a
known issuer prefix; words like "order" or "barcode" just before it say it is
not. Ids whose shape carries a check (Spanish DNI, Brazil's CPF, UK National
Insurance) are taken alone; bare digit ids need an id word (see keywords).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .checks import cpf_valid, dni_valid, iban_valid, luhn_valid
from .rules import Rule, Span, regex_rule
from .vocabulary import CARD_WORDS, NOT_A_CARD_WORDS

__all__ = ["CARD", "IBAN", "NATIONAL_ID", "RULES"]

CARD = "a payment card number"
IBAN = "a bank account number (IBAN)"
NATIONAL_ID = "a national id number"

_CARD_CANDIDATE = re.compile(
    r"\d(?<![\d+]\d)(?<!\d[ -]\d)(?:\d{11,18}"
    r"|\d{3}(?P<sep>[ -])\d{4}(?P=sep)\d{4}(?P=sep)\d{1,4}(?:(?P=sep)\d{3})?"
    r"|(?<=3)[47]\d{2}[ -]\d{6}[ -]\d{5})(?!\d)(?![ -]\d)"
)
_CARD_WORD = re.compile(CARD_WORDS, re.IGNORECASE)
_NOT_CARD_WORD = re.compile(NOT_A_CARD_WORDS, re.IGNORECASE)
# Issuer prefixes: Visa, Mastercard (51-55, 2221-2720), Amex, Discover, JCB, UnionPay, Diners.
_IIN = re.compile(
    r"4|5[1-5]|2(?:2[2-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|6(?:011|5|4[4-9]|2)|35(?:2[89]|[3-8])|3(?:0[0-5]|[68])"
)


def _last(pattern: re.Pattern[str], text: str, lo: int, hi: int) -> int:
    """Where the last match of ``pattern`` in ``text[lo:hi]`` ends, or -1."""
    end = -1
    for m in pattern.finditer(text, lo, hi):
        end = m.end()
    return end


def _cards(text: str) -> Iterator[Span]:
    for m in _CARD_CANDIDATE.finditer(text):
        number = re.sub(r"\D", "", m.group())
        if not 12 <= len(number) <= 19 or not luhn_valid(number):
            continue
        start, end = m.span()
        card_before = _last(_CARD_WORD, text, max(0, start - 48), start)
        not_card_before = _last(_NOT_CARD_WORD, text, max(0, start - 32), start)
        card_after = _CARD_WORD.search(text, end, min(len(text), end + 24)) is not None
        if not_card_before > card_before and not card_after:
            continue
        if card_before >= 0 or card_after:
            yield start, end
        elif m.group() != number and len(number) in (15, 16) and _IIN.match(number):
            yield start, end  # printed in groups, with an issuer's prefix: a card even without a word


def _iban_check(m: re.Match[str]) -> bool:
    return iban_valid(m.group())


def _ibans(low: str) -> Iterator[Span]:
    """IBAN candidates, shortened group by group until the checksum holds (a word may follow the last group)."""
    for m in _IBAN_CANDIDATE.finditer(low):
        if m.start() and low[m.start() - 1].isalnum():
            continue
        candidate = m.group()
        while len(re.sub(r"\s", "", candidate)) >= 15:
            if iban_valid(candidate):
                yield m.start(), m.start() + len(candidate)
                break
            cut = candidate.rfind(" ")
            if cut <= 4:
                break
            candidate = candidate[:cut]


_IBAN_CANDIDATE = re.compile(r"[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,3})?\b")


def _dni(m: re.Match[str]) -> bool:
    number, letter = m.group("num"), m.group("letter")
    if m.groupdict().get("nie"):
        number = str("XYZ".index(m.group("nie").upper())) + number
    return dni_valid(number, letter)


def _cpf(m: re.Match[str]) -> bool:
    return cpf_valid(m.group())


RULES: tuple[Rule, ...] = (
    Rule(CARD, lambda text, low, anchors: _cards(text)),
    Rule(IBAN, lambda text, low, anchors: _ibans(low)),
    # UK National Insurance number (HMRC's excluded letters and prefixes).
    regex_rule(
        NATIONAL_ID,
        r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b",
        lambda m: m.group()[:2] not in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ"),
        left=r"\w",
    ),
    # Spanish DNI (8 digits) and NIE (X, Y or Z and 7 digits), each with its check letter.
    regex_rule(NATIONAL_ID, r"(?P<num>\d{8})-?(?P<letter>[A-Z])(?![A-Za-z\d])", _dni, left=r"[\dA-Za-z]"),
    regex_rule(NATIONAL_ID, r"(?P<nie>[XYZ])-?(?P<num>\d{7})-?(?P<letter>[A-Z])(?![A-Za-z\d])", _dni,
               left=r"[\dA-Za-z]"),
    # Brazil's CPF in its printed form.
    regex_rule(NATIONAL_ID, r"\d{3}\.\d{3}\.\d{3}-\d{2}(?![\d-])", _cpf, left=r"[\d.]"),
)
