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


def _inside_token(text: str, start: int, end: int) -> bool:
    """Digits that are part of a longer letters-and-digits token (a hex tag, a hash): not a card's shape."""
    return (start > 0 and text[start - 1].isascii() and text[start - 1].isalpha()) or (
        end < len(text) and text[end].isascii() and text[end].isalpha())


def _cards(text: str) -> Iterator[Span]:
    for m in _CARD_CANDIDATE.finditer(text):
        if _inside_token(text, *m.span()):
            continue
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


# The length of each country's IBAN (the SWIFT registry, and the countries that use the form
# without being in it). A checksum that holds on a string of another length is chance: one in 97.
_IBAN_LENGTHS: dict[str, int] = {
    **dict.fromkeys("no".split(), 15), **dict.fromkeys("be".split(), 16),
    **dict.fromkeys("dk fi fo gl nl sd fk".split(), 18), **dict.fromkeys("mk si".split(), 19),
    **dict.fromkeys("at ba ee kz lt lu xk mn".split(), 20), **dict.fromkeys("ch hr li lv".split(), 21),
    **dict.fromkeys("bg bh cr de ge gb ie me rs va".split(), 22),
    **dict.fromkeys("ae gi il iq om so tl".split(), 23),
    **dict.fromkeys("ad cz es md pk ro sa se sk tn vg".split(), 24),
    **dict.fromkeys("pt st ly ao cv gw mz".split(), 25), **dict.fromkeys("is tr dz ir".split(), 26),
    **dict.fromkeys("fr gr it mc mr sm bi dj cm cf td km cg gq ga mg".split(), 27),
    **dict.fromkeys("al az by cy do gt hu lb pl sv ni bj bf ci hn ml ma ne sn tg".split(), 28),
    **dict.fromkeys("br eg ps qa ua".split(), 29), **dict.fromkeys("jo kw mu ye".split(), 30),
    **dict.fromkeys("mt sc".split(), 31), "lc": 32, "ru": 33,
}


def _iban_shaped(candidate: str) -> bool:
    """A known country's code, its check digits and the country's length; the checksum then decides."""
    compact = re.sub(r"\s", "", candidate)
    return _IBAN_LENGTHS.get(compact[:2]) == len(compact) and iban_valid(compact)


def _ibans(low: str) -> Iterator[Span]:
    """IBAN candidates, shortened group by group until the checksum holds (a word may follow the last group)."""
    for m in _IBAN_CANDIDATE.finditer(low):
        if m.start() and low[m.start() - 1].isalnum():
            continue
        candidate = m.group()
        while len(re.sub(r"\s", "", candidate)) >= 15:
            if _iban_shaped(candidate):
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
