"""Secrets given as the second half of a pair: an account number beside its routing number or
sort code, a password beside the e-mail address it logs in with.

The first half is public or harmless alone: a routing number, a sort code or a SWIFT code
names a bank branch (it is printed on every cheque), an e-mail address is an address. What
sits next to it is not: "routing 021000021, account 483920175563" and "12-34-56 12345678"
give an account to draw from, "login: bob@example.com Tr0ub4dor&3x" is a way in. So the
public half is kept and the other half withheld; a routing number alone is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .checks import password_like
from .rules import Rule, Span, regex_rule
from .vocabulary import latin

__all__ = ["ACCOUNT", "PASSWORD", "RULES"]

ACCOUNT = "a bank account number"
PASSWORD = "a password"

# --- an account number beside a bank's public code -------------------------------------------

# Words that name a bank's public code; the code itself follows within a few words.
_BANK_CODE_WORDS = re.compile(latin(
    r"routing(?: (?:number|no\.?|code|transit number))?", r"aba(?: (?:routing )?(?:number|no\.?))?", r"rtn",
    r"sort(?:[ -]?codes?)?", r"bsb(?: number| no\.?)?", r"transit(?: number| no\.?)?", r"ifsc(?: code)?",
    r"bankleitzahl", r"blz", r"swift(?:[ /-]?bic)?(?: code)?", r"bic(?: code)?", r"clabe interbancaria",
    r"codice abi", r"code banque", r"code guichet",
))
_BANK_CODE_STEMS = ("routing", "aba", "rtn", "sort", "bsb", "transit", "ifsc", "bankleitzahl", "blz", "swift", "bic",
                    "abi", "banque", "guichet")
# The codes themselves: ABA (9 digits), sort code (NN-NN-NN), BSB (NNN-NNN), Bankleitzahl
# (8 digits, maybe in groups), IFSC (4 letters, 0, 6 characters), SWIFT/BIC (8 or 11).
_BANK_CODE = re.compile(
    r"\d{9}|\d{3} ?\d{3} ?\d{2}|\d{2}[- ]?\d{2}[- ]?\d{2}|\d{3}-?\d{3}|[A-Z]{4}0[A-Z0-9]{6}"
    r"|[A-Z]{6}[A-Z0-9]{2}(?:[A-Z0-9]{3})?"
)
# An account number: 6 to 17 digits, maybe in groups of at least two.
_ACCOUNT_NUMBER = re.compile(r"(?<![\w.,/-])\d{2,}(?:[ -]\d{2,}){0,5}(?![\w/-]|[.,]\d)")
_ACCOUNT_WORD = re.compile(latin(
    r"account(?: (?:number|no\.?|#))?", r"acct\.?", r"acc\.?", r"a/c", r"checking", r"savings", r"kontonummer",
    r"konto", r"cuenta", r"compte", r"conta", r"conto", r"rekening", r"счёт", r"счет", r"hesap", r"number", r"no\.?",
) + r"|账号|账户|口座|계좌")
# What may stand between a code's word and the code: "routing number is 021000021", "BSB: 062-000"
_WORD_OR_SEP = re.compile(r"(?:[ \t]+|[:#=/|,;-]|\r?\n|(?:is|was|number|no\.?|nr\.?|code|account|acct|and)\b){0,6}")
_DATE = re.compile(r"(?:19|20)\d\d-\d\d-\d\d|\d\d-\d\d-(?:19|20)\d\d")


def _account_numbers(text: str, lo: int, hi: int, skip: Span) -> Iterator[Span]:
    for m in _ACCOUNT_NUMBER.finditer(text, lo, hi):
        digits = sum(c.isdigit() for c in m.group())
        if 6 <= digits <= 17 and not (m.start() < skip[1] and skip[0] < m.end()) and not _DATE.fullmatch(m.group()):
            yield m.span()


_JOINING = frozenset("and und y et e i og och en is are es ist the its el la le der die das".split())


def _near(text: str, a: int, b: int) -> bool:
    """Only separators, account words and joining words lie in ``text[a:b]`` ("call" or "units" do not)."""
    between = _ACCOUNT_WORD.sub(" ", text[a:b].lower())
    words = re.findall(r"[^\W\d_]+", between)
    return len(between) <= 40 and "\n\n" not in between and all(w in _JOINING for w in words)


def _bank_pairs(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
    """The account number next to a routing number, sort code, BSB, IFSC or SWIFT code."""
    done = -1
    for p in sorted(set(anchors)):
        word = _BANK_CODE_WORDS.match(low, p)
        if word is None or p < done:
            continue
        sep = _WORD_OR_SEP.match(low, word.end())  # it matches at least nothing
        code = _BANK_CODE.match(text, sep.end() if sep else word.end())
        if code is None or (code.end() < len(text) and text[code.end()].isalnum()):
            continue
        done = code.end()
        after = [s for s in _account_numbers(text, code.end(), min(len(text), code.end() + 60), code.span())
                 if _near(text, code.end(), s[0])][:1]
        before = [s for s in _account_numbers(text, max(0, word.start() - 60), word.start(), code.span())
                  if _near(text, s[1], word.start())][-1:]
        for span in before + after:
            done = max(done, span[1])
            yield span


# --- a password beside the e-mail address it logs in with --------------------------------------

_LOCAL = re.compile(r"[\w.+-]{1,64}$")
_DOMAIN = re.compile(r"@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w@-])")
# "bob@x.com:pw", "bob@x.com / pw", "bob@x.com | pw": a separator that pairs the two
_PAIRED = re.compile(r"(?::|[ \t]*[/|][ \t]*|[ \t]+:[ \t]+)(?P<value>[^\s,;]{8,64})(?=[\s,;)]|$)")
# "login: bob@x.com Tr0ub4dor&3x": a blank, when a login word says what the address is for (or the
# token has a symbol and ends the line: "bob@x.com Tr0ub4dor&3x")
_BLANK = re.compile(r"(?:[ \t]+|[ \t]*[,-][ \t]+)(?P<value>[^\s,;]{8,64})(?=[\s,;)]|$)")
_LOGIN_WORDS = re.compile(latin(
    r"log ?in", r"logins?", r"sign(?:ed)? ?in", r"signin", r"user(?: ?name)?", r"e-?mail", r"account", r"acc",
    r"credentials?", r"creds", r"benutzer(?:name)?", r"anmeldung", r"zugangsdaten", r"usuario", r"correo",
    r"identifiant", r"connexion", r"utente", r"usu[áa]rio", r"логин", r"учётка", r"учетка",
) + r"|账号|帳號|アカウント|ログイン|계정|아이디")


_SYMBOL = re.compile(r"[!#$%^&*?~+=|\\;<>{}\[\]]")
_ENDS = re.compile(r"[ \t]*(?:[\r\n]|$|[,;)][ \t]*(?:[\r\n]|$))")


_LABEL = re.compile(r"[A-Za-z]{1,12}[:=]")  # "Tel:+44...", "ext=42": a field, not a password


def _secret_shaped(value: str) -> bool:
    """A password with no word naming it: letters and digits and a symbol or mixed case."""
    return (
        password_like(value, min_length=6)
        and any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and (not value.isalnum() or (not value.islower() and not value.isupper()))
        and "@" not in value
        and _LABEL.match(value) is None
    )


def _email_passwords(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
    for p in anchors:
        local = _LOCAL.search(text, max(0, p - 64), p)
        domain = _DOMAIN.match(text, p)
        if local is None or domain is None:
            continue
        end = domain.end()
        line_start = text.rfind("\n", 0, local.start()) + 1
        login = _LOGIN_WORDS.search(low, max(line_start, local.start() - 40), local.start()) is not None
        m = _PAIRED.match(text, end)
        if m is not None and not (login or text[end] == ":" or not m.group("value").isalnum()):
            m = None  # "bob@x.com / Team2024": a pair only with a login word, a combo's ":" or a symbol
        if m is None:
            m = _BLANK.match(text, end)
            if m is not None and not login and not (_SYMBOL.search(m.group("value")) and _ENDS.match(text, m.end())):
                m = None  # with no login word, only a token with a symbol that ends the line or the clause
        if m is None:
            continue
        value = m.group("value").rstrip(".)\"'`")
        if len(value) >= 8 and _secret_shaped(value):
            yield m.start("value"), m.start("value") + len(value)


RULES: tuple[Rule, ...] = (
    Rule(ACCOUNT, _bank_pairs, _BANK_CODE_STEMS),
    # a UK sort code and an 8-digit account number, with no word at all: "12-34-56 12345678"
    regex_rule(ACCOUNT, r"\d{2}-\d{2}-\d{2}(?:[ \t]*[,/|;:][ \t]*|[ \t]+)(?P<value>\d{8})(?![\d-]|[.,]\d)", left=r"[\w.-]",
               hints=("-",)),
    regex_rule(ACCOUNT, r"(?P<value>\d{8})(?:[ \t]*[,/|;:][ \t]*|[ \t]+)\d{2}-\d{2}-\d{2}(?![\d-]|[.,]\d)", left=r"[\w.-]",
               hints=("-",)),
    Rule(PASSWORD, _email_passwords, ("@",)),
)
