"""Resolution: which existing node a new mention is, within one owner's graph. Pure.

A mention is the node whose canonical name or one of whose aliases it is; failing that, a
person whose name is a spelling variant of it (``Sara`` / ``Sarah``, ``Jon`` / ``John``:
same first letter, a close string, both at least four letters, and one candidate only, so two
different people are never merged on a guess). Only nodes of the same graph are ever offered
(the statement reads one scope), so nodes of two owners are never merged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

from .extract import Found, canonical

__all__ = ["VARIANT_RATIO", "resolve", "variant_of"]

#: how close two person names must be (difflib ratio) to be one person spelled two ways
VARIANT_RATIO = 0.85


def _word_variant(a: str, b: str) -> bool:
    if len(a) < 4 or len(b) < 4 or a[0] != b[0] or abs(len(a) - len(b)) > 1:
        return False
    return SequenceMatcher(None, a, b).ratio() >= VARIANT_RATIO


def variant_of(a: str, b: str) -> bool:
    """``a`` and ``b`` (canonical names) are one name spelled two ways: as many words, all equal
    but one, and that one a close spelling (at least four letters, same first letter, at most
    one letter longer or shorter): ``sara``/``sarah``, ``sara lee``/``sarah lee``; never
    ``alma abbott``/``ana abbott``."""
    if a == b:
        return True
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb):
        return False
    differ = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    return len(differ) == 1 and _word_variant(*differ[0])


def _kind(row: Mapping[str, Any]) -> tuple[str, str]:
    return row["node_type"], row["entity_type"] if row["node_type"] == "entity" else ""


def resolve(found: Sequence[Found], existing: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any] | None]:
    """For each mention (by canonical name): the existing node row it is, or None (a new node).

    ``existing`` rows carry ``id``, ``node_type``, ``entity_type``, ``canonical_name`` and ``aliases``.
    An exact name or alias of the same kind wins; then an exact name of any kind (a person
    already known is not made an organisation by a weaker rule); then one spelling variant."""
    out: dict[str, Mapping[str, Any] | None] = {}
    for f in found:
        key = canonical(f.name)
        kind = (f.node_type, f.entity_type if f.node_type == "entity" else "")
        named = [r for r in existing if r["canonical_name"] == key or key in (r["aliases"] or ())]
        same = [r for r in named if _kind(r) == kind]
        if same:
            out[key] = same[0]
        elif named:
            out[key] = named[0]
        elif f.node_type == "person":
            close = [r for r in existing if r["node_type"] == "person" and not r.get("is_owner")
                     and variant_of(key, r["canonical_name"])]
            out[key] = close[0] if len(close) == 1 else None
        else:
            out[key] = None
    return out
