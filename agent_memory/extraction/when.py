"""When a fact began, from what the user said: dates and relative expressions, resolved against
the time they said it.

"I moved to Lisbon last month", said on 26 November 2026, holds from 26 October 2026. Pure
functions: :func:`resolve_when` finds the first expression of time in a statement ("yesterday",
"two weeks ago", "last month", "last Tuesday", "in March", "in March 2023", "on 3 May 2024",
"May 3rd", "2024-05-03", "since 2019") and answers the start of the day it names, in the zone of
``now``. An expression that would name a time after ``now`` ("next month", "in two weeks"), or no
expression at all, answers None: the fact then holds from when it is recorded. A month or a year
without a day means its first day ("in March" said in November: 1 March; said in February: 1 March
of the year before). Words that only look like dates are not dates: "May I ask", "March on",
"the 2019 report".
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["anchor_when", "resolve_when", "said_on"]

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted((re.escape(w) for w in _NUMBERS), key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"

#: (pattern, kind), tried at every position; the earliest match in the text wins, then the
#: first pattern here. Month names match only next to a day or a year, or after a preposition
#: ("in March"), and "may"/"march" only capitalized there, so verbs are not dates.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), kind) for p, kind in (
    (r"\b(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)\b", "iso"),
    (rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH},?(?:\s+{_YEAR})?\b", "day_month"),
    (rf"\b{_MONTH}\s+(?:the\s+)?{_DAY}\b(?!:)(?:,?\s+{_YEAR})?", "month_day"),
    (r"\b(?P<back>the day before yesterday|yesterday|today|this morning|tonight|earlier today)\b", "days"),
    (rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", "ago"),
    (rf"\b(?P<which>last|this)\s+{_UNIT}\b", "last_unit"),
    (r"\b(?P<which>last|on|this past)\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b", "weekday"),
    (rf"\b(?:in|since|from|during|back in|last|this)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}(?:,?\s+{_YEAR})?(?!\w)",
     "month"),
    (rf"\b(?:in|since|from|during|back in)\s+(?:early\s+|late\s+|mid-?)?{_YEAR}\b(?![-/.]\d)", "year"),
))

_CAPITALIZED_ONLY = {"may", "march", "mar"}


def _minus_months(day: date, months: int) -> date:
    """``day`` ``months`` calendar months earlier, on the same day of the month (or the last one)."""
    index = day.year * 12 + day.month - 1 - months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _month_of(m: re.Match[str]) -> int | None:
    word = m.group("month")
    if word.lower() in _CAPITALIZED_ONLY and not word[0].isupper():
        return None
    return _MONTHS[word.lower()]


def _latest(month: int, day: int, year: int | None, today: date) -> date | None:
    """The date ``day``/``month`` of ``year``, or without a year the latest one not after ``today``."""
    try:
        if year is not None:
            return date(year, month, day)
        found = date(today.year, month, day)
        return found if found <= today else date(today.year - 1, month, day)
    except ValueError:  # 31 April, 29 February of a common year
        return None


def _resolve(m: re.Match[str], kind: str, today: date) -> date | None:
    g = m.groupdict()
    if kind == "iso":
        try:
            return date(int(g["y"]), int(g["m"]), int(g["d"]))
        except ValueError:
            return None
    if kind in ("day_month", "month_day"):
        month = _month_of(m)
        if month is None and g.get("year") is None and kind == "month_day" and m.group("month")[0].isupper():
            month = _MONTHS[m.group("month").lower()]  # "May 3": a capital and a day make it a date
        if month is None:
            return None
        day = int(g["day"])
        if not 1 <= day <= 31:
            return None
        return _latest(month, day, int(g["year"]) if g.get("year") else None, today)
    if kind == "days":
        back = g["back"].lower()
        return today - timedelta(days=2 if back.startswith("the day before") else 1 if back == "yesterday" else 0)
    if kind in ("ago", "last_unit"):
        n = 1 if kind == "last_unit" else (int(g["n"]) if g["n"].isdigit() else _NUMBERS[g["n"].lower()])
        unit = g["unit"].lower()
        if kind == "last_unit" and g["which"].lower() == "this":  # the start of this week/month/year
            return {"day": today, "week": today - timedelta(days=today.weekday()),
                    "month": today.replace(day=1), "year": today.replace(month=1, day=1)}[unit]
        if n > 200:
            return None
        if unit == "day":
            return today - timedelta(days=n)
        if unit == "week":
            return today - timedelta(weeks=n)
        return _minus_months(today, n * (12 if unit == "year" else 1))
    if kind == "weekday":
        weekday = _WEEKDAYS[g["weekday"].lower()]
        back = (today.weekday() - weekday) % 7
        if back == 0 and g["which"].lower() != "on":
            back = 7
        return today - timedelta(days=back)
    if kind == "month":
        month = _month_of(m)
        if month is None:
            return None
        if g.get("year"):
            return date(int(g["year"]), month, 1)
        if m.group(0).lower().startswith("last") and month >= today.month:
            return date(today.year - 1, month, 1)
        return date(today.year if month <= today.month else today.year - 1, month, 1)
    if kind == "year":
        return date(int(g["year"]), 1, 1)
    raise AssertionError(kind)


def _first(text: str, today: date) -> tuple[re.Match[str], str, date] | None:
    """The first expression of time in ``text`` that names a day (earliest in the text, then the
    first pattern), with its kind and the day it names."""
    found: list[tuple[int, int, re.Match[str], str, date]] = []
    for order, (pattern, kind) in enumerate(_PATTERNS):
        for m in pattern.finditer(text):
            day = _resolve(m, kind, today)
            if day is not None:
                found.append((m.start(), order, m, kind, day))
                break
    if not found:
        return None
    _, _, m, kind, day = min(found, key=lambda f: (f[0], f[1]))
    return m, kind, day


def resolve_when(text: str, now: datetime) -> datetime | None:
    """When the first expression of time in ``text`` begins, resolved against ``now`` (an aware
    time: when it was said), as the start of that day in ``now``'s zone; None when ``text``
    names no time, or one after ``now``."""
    if not isinstance(text, str) or not text:
        return None
    first = _first(text, now.date())
    if first is None:
        return None
    day = first[2]
    if day > now.date() or day.year < 1900:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=now.tzinfo)


def _on(day: date) -> str:
    return f"{day.day} {calendar.month_name[day.month]} {day.year}"


def _absolute(m: re.Match[str], kind: str, day: date) -> str | None:
    """The words for what ``m`` names, without reference to when it was said; None when ``m`` is
    already absolute ("on 3 May 2024", "in March 2023", "since 2019")."""
    g = m.groupdict()
    if kind in ("days", "weekday"):
        return f"on {_on(day)}"
    if kind in ("ago", "last_unit"):
        unit = g["unit"].lower()
        if unit == "day":
            return f"on {_on(day)}"
        if unit == "week":
            return f"in the week of {_on(day)}"
        if unit == "month":
            return f"in {calendar.month_name[day.month]} {day.year}"
        return f"in {day.year}"
    if kind == "month" and not g.get("year"):
        lead = m.group(0).split()[0].lower()
        preposition = lead if lead in ("since", "from", "during") else "in"
        return f"{preposition} {calendar.month_name[day.month]} {day.year}"
    return None  # a date with a day is kept as said ("on May 3rd": which year is not always meant)


def anchor_when(text: str, now: datetime) -> str:
    """``text`` with its first relative expression of time written as the date it names, so a
    memory stays true after the day it was said: "Moved to Lisbon last month.", said on 26
    November 2026, becomes "Moved to Lisbon in October 2026."; "Adopted a cat yesterday." becomes
    "Adopted a cat on 25 November 2026.". Text with no such expression, an absolute date, or one
    that would name a time after ``now`` is returned as it is."""
    if not isinstance(text, str) or not text:
        return text
    first = _first(text, now.date())
    if first is None or first[2] > now.date():
        return text
    m, kind, day = first
    words = _absolute(m, kind, day)
    if words is None:
        return text
    before, said = text[: m.start()], m.group(0)
    if words.startswith("on ") and re.search(r"\bon\s+$", before):  # "on Tuesday" -> "on 24 November 2026"
        before = before[: re.search(r"\bon\s+$", before).start()]  # type: ignore[union-attr]
    if said[0].isupper():
        words = words[0].upper() + words[1:]
    if said.endswith(".") and not text[m.end():].strip():  # the month took the sentence's full stop along
        words += "."
    return before + words + text[m.end():]


_STAMP_KEYS = ("timestamp", "created_at", "sent_at", "time", "date")


def said_on(message: object) -> datetime | None:
    """When a message was said, if it carries the time: a ``timestamp`` / ``created_at`` /
    ``sent_at`` / ``time`` (an aware or UTC-naive datetime, an ISO-8601 string or epoch seconds)
    in a dict message, or in a LangChain message's ``additional_kwargs`` or ``response_metadata``."""
    places: list[object] = [message]
    for attr in ("additional_kwargs", "response_metadata"):
        places.append(getattr(message, attr, None))
    for place in places:
        if not isinstance(place, dict):
            continue
        for key in _STAMP_KEYS:
            value = place.get(key)
            at: datetime | None = None
            if isinstance(value, datetime):
                at = value
            elif isinstance(value, str):
                try:
                    at = datetime.fromisoformat(value.strip())
                except ValueError:
                    at = None
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e11:
                at = datetime.fromtimestamp(value, UTC)
            if at is not None:
                return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return None
