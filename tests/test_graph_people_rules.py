"""The offline rules that decide who is a person (issue 32, measured on LoCoMo in
``benchmarks/graph_people.py``): speaker labels, authors, initials, and the capitalised words
that are no one (titles, places, teams, brands, "Game 7"). Pure: no database."""

from __future__ import annotations

from agent_memory.graph.extract import extract


def _kinds(text: str) -> dict[str, str]:
    """The nodes a memory makes (a capitalised word opening a sentence, ``known_only``, makes none
    unless the graph knows it already; it shows with a ``?``)."""
    return {f.name: f.node_type + (f"/{f.entity_type}" if f.entity_type else "") + ("?" if f.known_only else "")
            for f in extract(text).found if not (f.known_only and f.name in _OPENERS)}


_OPENERS = {"Watched", "Bought"}


def test_a_speaker_label_and_an_author_are_people():
    assert _kinds("[9 May 2023] Mira: I am reading an old novel by Terry Pratchett.") == {
        "Mira": "person", "Terry Pratchett": "person"}
    assert _kinds("Sarah: see you tomorrow") == {"Sarah": "person"}
    assert _kinds("Note: deploys go out on Fridays.") == {}  # a label that is a common word is no one


def test_initials_do_not_end_a_sentence():
    assert _kinds("I think J.K. Rowling writes well.") == {"Rowling": "person"}


def test_titles_places_teams_and_brands_are_not_people():
    assert _kinds('John loved "The Colour of Magic" and Lord of the Rings.') == {"John": "person?"}
    assert _kinds("We went to Galway and had a week in Edinburgh.") == {
        "Galway": "entity/location", "Edinburgh": "entity/location"}
    assert _kinds("The trip: Seattle and Ireland were great, then the Rocky Mountains.") == {
        "Seattle": "entity/location", "Ireland": "entity/location", "Rocky Mountains": "entity/location"}
    assert _kinds("Watched the Wolves win, then the block in Game 7.") == {"Wolves": "entity/other"}
    assert _kinds("Bought new shoes from Nike and a Gatorade.") == {"Nike": "entity/organisation",
                                                                   "Gatorade": "entity/organisation"}
    assert _kinds("Congrats John! Winning the Finals is huge, said the European coach.") == {"John": "person"}


def test_a_name_keeps_no_trailing_possessive_or_dash():
    assert set(_kinds("A song like Ed Sheeran's and a walk with Max- so fun.")) == {"Ed Sheeran", "Max"}
