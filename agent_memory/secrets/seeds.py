"""Wallet recovery phrases (BIP-39): twelve or more words in a row from a 2,048-word list.

A seed phrase is the whole wallet, and it is made of ordinary words, so no
pattern of characters finds it. What gives it away is that every word comes from
one published list and that there are at least twelve of them in a row: prose
needs "the", "of", "is", which are not on any list. The word lists come from the
``mnemonic`` package (the reference implementation); English, Spanish, French,
Italian, Portuguese and Czech are checked. The scripts without spaces (Chinese,
Japanese, Korean lists) are left out: their "words" are single characters of
ordinary text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from itertools import accumulate, repeat

from mnemonic import Mnemonic

__all__ = ["MIN_WORDS", "find_seed_phrases"]

#: the shortest phrase BIP-39 defines
MIN_WORDS = 12
_LANGUAGES = ("english", "spanish", "french", "italian", "portuguese", "czech")

# Words are runs of non-space characters; punctuation around them is dropped and a
# list number ("1.", "2)") between two words does not end the phrase.
_TOKEN = re.compile(r"\S+")
_PUNCT = ".,;:!?()[]{}\"'`·•|-"
_NUMBERING = re.compile(r"\d{1,2}[.):]?")


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def _wordlists() -> dict[str, int]:
    """Every listed word (as listed and without accents) -> a bit mask of the lists it is on."""
    masks: dict[str, int] = {}
    for bit, lang in enumerate(_LANGUAGES):
        for w in Mnemonic(lang).wordlist:
            for key in {unicodedata.normalize("NFC", w), _fold(w)}:
                masks[key] = masks.get(key, 0) | 1 << bit
    return masks


_BLANK_PUNCT = re.compile("[" + re.escape(_PUNCT) + "]")
# A word's mask as one character, a list number as "#": a phrase is a run of mask characters.
_RUN = re.compile(r"[\x01-\x3f][\x01-\x3f#]{%d,}" % (MIN_WORDS - 2) + r"[\x01-\x3f]")


@lru_cache(maxsize=1)
def _mask_chars() -> dict[str, str]:
    chars = {word: chr(mask) for word, mask in _wordlists().items()}
    chars.update({str(n): "#" for n in range(100)})
    return chars


def find_seed_phrases(text: str, low: str) -> Iterator[tuple[int, int]]:
    """Spans of runs of at least :data:`MIN_WORDS` words of ``low`` (``text`` lower-cased) all on one BIP-39 list.

    Words are looked up in one pass over ``low`` with its punctuation blanked, their
    masks written as one character each, and runs found by a regular expression
    over those characters; positions are only worked out for a run long enough.
    """
    words = _BLANK_PUNCT.sub(" ", low).split()
    flags = "".join(map(_mask_chars().get, words, repeat("\x00")))
    offsets: list[int] = []
    for m in _RUN.finditer(flags):
        if not offsets:  # a lower bound of each word's position: at least one blank between words
            offsets = list(accumulate((len(w) + 1 for w in words), initial=0))
        first = m.start()
        alive = 0x3F
        count = 0
        for i in range(m.start(), m.end() + 1):
            mask = ord(flags[i]) if i < m.end() and flags[i] != "#" else -1
            if mask == -1 and i < m.end():
                continue
            if i < m.end() and mask & alive:
                alive &= mask
                count += 1
                last = i
                continue
            if count >= MIN_WORDS and _varied(words[first:last + 1]):
                yield _locate(low, words, first, last, offsets[first])
            if i < m.end():
                first, alive, count, last = i, mask, 1, i


def _varied(run: list[str]) -> bool:
    """Most words of the run differ, as in a phrase drawn at random from 2,048 words.

    Twelve random draws repeat a word about 3% of the time and almost never more
    than twice, while repeated filler ("word word word ...") repeats all the time.
    """
    listed = [w for w in run if not w.isdigit()]
    return len(set(listed)) >= 0.75 * len(listed)


def _locate(low: str, words: list[str], first: int, last: int, estimate: int) -> tuple[int, int]:
    """The span in ``low`` of ``words[first..last]``, searched from ``estimate`` (at most their position).

    Only the first and the last twelve words are matched, so a very long run costs no more than a short one.
    """
    def pattern(run: list[str]) -> re.Pattern[str]:
        return re.compile(r"\W*".join(re.escape(w) for w in run))

    head = pattern(words[first:min(last + 1, first + MIN_WORDS)]).search(low, estimate)
    if head is None:
        return 0, 0
    if last - first < MIN_WORDS:
        return head.start(), head.end()
    tail = pattern(words[last + 1 - MIN_WORDS:last + 1]).search(low, head.start())
    return head.start(), (tail.end() if tail else head.end())
