"""Words that say a random-looking value names data, not a way in: a cache key, an ETag, a commit.

"Key" and "token" stand before credentials and before much else: "the cache key is
3f9c...", "idempotency key d907e997-...", "commit 40e2ec05... fixed it", "the token hash is
8a10...". Such a value is as random as an API key, so its shape cannot tell them apart; the
words around it can. A key word whose qualifier names a data structure ("cache key",
"partition key", "public key") is not a credential word at all, and a hex value (a digest,
a uuid) with a word of hashes and ids close by (etag, checksum, commit, hash, sha, digest,
request id, trace id...) is taken for what those words say it is. Credential words keep
their weight: "API key", "secret key" and "access token" are never qualified away.
"""

from __future__ import annotations

import re

from .vocabulary import latin

__all__ = ["data_key", "names_data"]

# Words before "key" or "token" that make it a key of a table, a cache or a map.
_QUALIFIER = re.compile(latin(
    r"cache", r"caching", r"cached", r"idempotency", r"idempotent", r"dedup(?:e|lication)?", r"partition",
    r"partitioning", r"primary", r"foreign", r"sort", r"sorting", r"lookup", r"object", r"row", r"composite",
    r"unique", r"natural", r"surrogate", r"map", r"dict", r"dictionary", r"hash", r"translation", r"i18n", r"shard",
    r"sharding", r"cursor", r"pagination", r"continuation", r"public", r"pub", r"authorized", r"known", r"gpg",
    r"pgp", r"registry", r"index", r"join", r"clustering", r"distribution", r"routing", r"grouping", r"bucket",
    r"event", r"message", r"record", r"column", r"field", r"answer", r"shortcut", r"hot",
) + r"\W{0,3}$")
# The key and token words a qualifier can take: the plain ones ("API key", "secret key",
# "access token" name a credential whatever comes before them).
_PLAIN = re.compile(r"[\s_-]*(?:keys?|tokens?|cl[ée]s?|schl[üu]ssel[sn]?|llaves?|chaves?|chiav[ei]|ключ\w*|токен\w*)[\s_-]*")
# Words of hashes and identifiers: a hex value near one of them is one of those.
_DATA_WORDS = re.compile(latin(
    r"e-?tags?", r"if-none-match", r"checksums?", r"check ?sums?", r"commits?", r"committed", r"hash(?:es|ed)?",
    r"sha(?:-?\d+)?(?:sum)?", r"md5(?:sum)?", r"crc(?:-?32)?", r"digests?", r"fingerprints?", r"revisions?",
    r"uuids?", r"guids?", r"ulids?", r"(?:request|req|trace|span|correlation|build|run|job|event|message|object|"
    r"transaction|operation|execution|workflow|deployment|container|image|task|batch|record|row|entity|upload|"
    r"file|document|order|ticket|device|node|instance|artifact|release|snapshot)[ _-]?ids?",
    r"x-request-id", r"x-correlation-id", r"traceparent", r"idempotency", r"idempotency-key", r"cache", r"cached",
    r"caching", r"dedup(?:e|lication)?", r"nonce",
))
# Words that say so only between the word and the value, or just after the value:
# "the key for this row is 53bb...", "key ea3a... in the translation table", "... was evicted"
_DATA_AFTER = re.compile(latin(
    r"rows?", r"tables?", r"records?", r"columns?", r"translations?", r"objects?", r"blobs?", r"evicted", r"expired",
    r"entry", r"entries",
))
_HEX_ID = re.compile(r"(?:(?:sha\d*|md5)[:=])?[0-9a-f]+(?:[-:][0-9a-f]+)*", re.IGNORECASE)


def data_key(word: str, low: str, word_start: int) -> bool:
    """The key or token ``word`` starting at ``word_start`` is qualified as a data key ("cache key")."""
    return _PLAIN.fullmatch(word) is not None and _QUALIFIER.search(low, max(0, word_start - 24), word_start) is not None


# "the hash of my password", "a digest for the API key": the value is of the credential, not it
_OF_THE_CREDENTIAL = re.compile(
    r"(?:hash(?:es|ed)?|digests?|checksums?|fingerprints?|sha\w*|md5\w*)\s+(?:of|for|from)\s+(?:[^\W\d_]+\s+){0,2}$"
)


def names_data(text: str, low: str, word: str, word_start: int, value: tuple[int, int]) -> bool:
    """The value at ``value`` is a hex digest or id, and a word of hashes or ids says so: between the
    credential word and the value, or, for a plain key word ("key", "token"), in the 40 characters
    before it or just after the value ("commit ... key 3f9c...", "key 3f9c... was evicted"). Around
    "API key" or "password" it must be about the credential ("the hash of my password is ..."):
    "don't commit the API key 3f9c..." still names a key."""
    start, end = value
    if _HEX_ID.fullmatch(text, start, end) is None:
        return False
    if _DATA_WORDS.search(low, word_start + len(word), start) or _DATA_AFTER.search(low, word_start, start):
        return True  # "key fingerprint ...", "the key for this row is ..."
    before = max(0, word_start - 40)
    if _PLAIN.fullmatch(word) is None:
        return _OF_THE_CREDENTIAL.search(low, before, word_start) is not None
    after = (end, min(len(low), end + 32))
    return any(words.search(low, lo, hi) is not None for words, (lo, hi) in (
        (_DATA_WORDS, (before, word_start)), (_DATA_WORDS, after), (_DATA_AFTER, after)))
