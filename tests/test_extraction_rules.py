"""Rule-based extraction: which sentences of a user turn become memory proposals, and how they read.

Pure: no database, no model.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from agent_memory.demo_model import offline_chat_model, offline_reply
from agent_memory.demo_model import statements_in as demo_statements_in
from agent_memory.errors import InvalidInputError
from agent_memory.extraction.rules import Statement, extract_proposals, statements_in
from agent_memory.models import MemoryType, Proposal, Scope

# (what the user said, content, memory_type, scope)
USER_STATEMENTS = [
    # explicit "remember"
    ("Remember that my dog is called Rex!", "Their dog is called Rex.", "fact", "user"),
    ("Please remember that the API key rotates monthly.", "The API key rotates monthly.", "fact", "user"),
    ("Note that I work remotely.", "Works remotely.", "fact", "user"),
    ("Don't forget that we deploy on AWS.", "The team deploys on AWS.", "fact", "project"),
    ("Keep in mind that I'm left-handed.", "Is left-handed.", "fact", "user"),
    ("Can you remember that I'm left-handed.", "Is left-handed.", "fact", "user"),
    ("Remember to always use type hints.", "Wants the assistant to always use type hints.", "preference", "user"),
    # preferences and instructions
    ("I prefer concise answers with Python examples.", "Prefers concise answers with Python examples.",
     "preference", "user"),
    ("I like dark mode.", "Likes dark mode.", "preference", "user"),
    ("I hate long meetings.", "Hates long meetings.", "preference", "user"),
    ("I don't like long answers.", "Doesn't like long answers.", "preference", "user"),
    ("Never use emojis in my code.", "Wants the assistant to never use emojis in their code.", "preference", "user"),
    ("Always answer in British English.", "Wants the assistant to always answer in British English.",
     "preference", "user"),
    ("I want you to always cite sources.", "Wants the assistant to always cite sources.", "preference", "user"),
    ("From now on, answer in French.", "Wants the assistant to answer in French from now on.", "preference", "user"),
    ("Please keep answers short from now on.", "Wants the assistant to keep answers short from now on.",
     "preference", "user"),
    ("Call me Sam.", "Wants to be called Sam.", "preference", "user"),
    # who the user is
    ("My name is Alice.", "Their name is Alice.", "fact", "user"),
    ("I'm a data engineer.", "Is a data engineer.", "fact", "user"),
    ("I am an accountant.", "Is an accountant.", "fact", "user"),
    ("I work at Acme as a data engineer", "Works at Acme as a data engineer.", "fact", "user"),
    ("I live in Lisbon.", "Lives in Lisbon.", "fact", "user"),
    ("I use Neovim.", "Uses Neovim.", "fact", "user"),
    ("I'm using uv.", "Uses uv.", "fact", "user"),
    ("I now use Neovim.", "Now uses Neovim.", "fact", "user"),
    ("I usually study in the morning.", "Usually studies in the morning.", "habit", "user"),
    ("I never use semicolons.", "Never uses semicolons.", "habit", "user"),
    # constraints
    ("I'm allergic to peanuts.", "Is allergic to peanuts.", "constraint", "user"),
    ("I'm vegan.", "Is vegan.", "constraint", "user"),
    ("I can't eat gluten.", "Can't eat gluten.", "constraint", "user"),
    ("I don't eat pork.", "Doesn't eat pork.", "constraint", "user"),
    # changes: the content keeps the change word, which consolidation reads as "this replaces an older memory"
    ("I switched from Vim to Neovim.", "Switched from Vim to Neovim.", "fact", "user"),
    ("I've switched to Neovim.", "Switched to Neovim.", "fact", "user"),
    ("I have moved to Berlin.", "Moved to Berlin.", "fact", "user"),
    ("I recently moved from Paris to Berlin.", "Recently moved from Paris to Berlin.", "fact", "user"),
    ("I migrated my blog from WordPress to Hugo.", "Migrated their blog from WordPress to Hugo.", "fact", "user"),
    ("I changed my editor to VS Code.", "Changed their editor to VS Code.", "fact", "user"),
]

TEAM_STATEMENTS = [
    # what the team uses
    ("We use FastAPI.", "The team uses FastAPI.", "fact"),
    ("We're using Poetry for packaging.", "The team uses Poetry for packaging.", "fact"),
    ("We are also using Redis for caching.", "The team uses Redis for caching.", "fact"),
    ("We currently use GitLab CI.", "The team currently uses GitLab CI.", "fact"),
    ("Our stack is Python, FastAPI and PostgreSQL.", "The team's stack is Python, FastAPI and PostgreSQL.", "fact"),
    ("Our team uses Go.", "The team uses Go.", "fact"),
    ("We deploy on Kubernetes.", "The team deploys on Kubernetes.", "fact"),
    ("We are a small fintech startup.", "The team is a small fintech startup.", "fact"),
    ("The team lead is Maria.", "The team lead is Maria.", "fact"),
    ("We prefer trunk-based development.", "The team prefers trunk-based development.", "preference"),
    ("We switched from Jenkins to GitHub Actions.", "The team switched from Jenkins to GitHub Actions.", "fact"),
    # conventions
    ("We always squash-merge pull requests.", "The team always squash-merges pull requests.", "habit"),
    ("We never deploy on Fridays.", "The team never deploys on Fridays.", "habit"),
    ("We usually pair on reviews.", "The team usually pairs on reviews.", "habit"),
    ("The team always writes tests first.", "The team always writes tests first.", "habit"),
    # constraints
    ("We must support Python 3.9.", "The team must support Python 3.9.", "constraint"),
    ("We have to keep the API backwards compatible.", "The team has to keep the API backwards compatible.",
     "constraint"),
    ("We can't use GPL code.", "The team can't use GPL code.", "constraint"),
    ("We cannot store card numbers.", "The team cannot store card numbers.", "constraint"),
    ("We're not allowed to call external APIs.", "The team is not allowed to call external APIs.", "constraint"),
    # context
    ("Our goal is to ship v1 by March.", "The team's goal is to ship v1 by March.", "context"),
    ("Our team's deadline is June.", "The team's deadline is June.", "context"),
    ("We are building a CRM for dentists.", "The team is building a CRM for dentists.", "context"),
    ("We're building an internal search tool.", "The team is building an internal search tool.", "context"),
    ("We are in the beta phase.", "The team is in the beta phase.", "context"),
    ("We\u2019re currently in the discovery phase.", "The team is currently in the discovery phase.", "context"),
    # decisions keep their rationale
    ("We decided to use PostgreSQL 16 because it has pgvector",
     "The team decided to use PostgreSQL 16 because it has pgvector.", "decision"),
    ("We decided to use PostgreSQL because we need pgvector and our ops know it.",
     "The team decided to use PostgreSQL because they need pgvector and their ops know it.", "decision"),
    ("We agreed to ship on Fridays.", "The team agreed to ship on Fridays.", "decision"),
    ("We chose React because the designers know it.", "The team chose React because the designers know it.",
     "decision"),
    ("We've decided to drop Python 3.8.", "The team decided to drop Python 3.8.", "decision"),
    ("My team decided to use Kafka because it scales.", "The team decided to use Kafka because it scales.",
     "decision"),
]


@pytest.mark.parametrize(("said", "content", "memory_type", "scope"), USER_STATEMENTS)
def test_user_statements(said, content, memory_type, scope):
    assert statements_in(said) == [Statement(content, memory_type, scope)]


#: what is said of "our team", "my team", "the team" belongs to the team (the run places it at the
#: project when it has no team); "we" is the project's team
SAID_OF_THE_TEAM = {"Our team uses Go.", "The team lead is Maria.", "The team always writes tests first.",
                    "Our team's deadline is June.", "My team decided to use Kafka because it scales."}


def _level(said: str) -> str:
    return "team" if said in SAID_OF_THE_TEAM else "project"


@pytest.mark.parametrize(("said", "content", "memory_type"), TEAM_STATEMENTS)
def test_team_statements_are_project_or_team_memories(said, content, memory_type):
    assert statements_in(said) == [Statement(content, memory_type, _level(said))]


@pytest.mark.parametrize("said", [
    # questions
    "Which database do we use?", "Do you remember what I prefer?", "I prefer tea?", "We use Go, right?",
    "Can you remember that I'm vegan?",
    # greetings and chit-chat
    "", "   ", "hello", "Hi!", "Good morning!", "Thanks!", "Great, thanks.", "Ok.", "Nice to meet you.",
    "That's great.", "I think so.", "I don't know.", "I'm fine, thanks.", "I'm not sure.", "I'm just checking.",
    "I have a question.", "We have a quick question.", "We're trying to fix a bug.", "I changed my mind.",
    "We agreed.",
    # one-off requests
    "Tell me a joke.", "Please write a function that sorts a list.", "Write me a poem about cats.",
    "Show me an example.", "Help me debug this.", "Can you explain decorators.", "Could you help me with this bug.",
    "Would you summarize this thread.", "I want you to write a haiku.", "I need help with my code.",
    "I want to know how async works.", "Let's start.", "Please, could you always answer in French",
])
def test_questions_small_talk_and_requests_give_nothing(said):
    assert statements_in(said) == []
    assert extract_proposals(said) == []


def test_a_turn_gives_its_statements_in_order_with_their_sentences_as_evidence():
    turn = ("Hi! I prefer tea. Also, we use Go.\nWe decided to use Postgres because it has pgvector! "
            "Could you write me a poem? btw my name is Alice")
    assert extract_proposals(turn, confidence=0.7) == [
        Proposal("Prefers tea.", MemoryType.PREFERENCE, Scope.USER, 0.7, "I prefer tea."),
        Proposal("The team uses Go.", MemoryType.FACT, Scope.PROJECT, 0.7, "Also, we use Go."),
        Proposal("The team decided to use Postgres because it has pgvector.", MemoryType.DECISION, Scope.PROJECT,
                 0.7, "We decided to use Postgres because it has pgvector!"),
        Proposal("Their name is Alice.", MemoryType.FACT, Scope.USER, 0.7, "btw my name is Alice"),
    ]


@pytest.mark.parametrize(("said", "memory_type", "scope"), [(s, t, sc) for s, _, t, sc in USER_STATEMENTS]
                         + [(s, t, _level(s)) for s, _, t in TEAM_STATEMENTS])
def test_proposals_are_statements_with_enums_evidence_and_confidence(said, memory_type, scope):
    [proposal] = extract_proposals(said)
    [statement] = statements_in(said)
    assert proposal.content == statement.content
    assert proposal.memory_type is MemoryType(memory_type) and proposal.scope is Scope(scope)
    assert proposal.scope in (Scope.USER, Scope.PROJECT, Scope.TEAM)
    assert proposal.confidence == 0.9 and proposal.evidence == said.strip()


def test_confidence_is_passed_through_and_checked():
    assert [p.confidence for p in extract_proposals("I prefer tea. We use Go.", confidence=0.55)] == [0.55, 0.55]
    assert extract_proposals("I prefer tea.", confidence=1)[0].confidence == 1.0
    for bad in (1.5, -0.1, float("nan"), "high", True):
        with pytest.raises(InvalidInputError):
            extract_proposals("I prefer tea.", confidence=bad)


def test_every_change_statement_says_what_changed():
    for said in ("I switched from Vim to Neovim.", "I moved to Berlin.", "I changed my shell to fish.",
                 "I've migrated to Kubernetes.", "We switched from Jenkins to GitHub Actions."):
        [proposal] = extract_proposals(said)
        assert any(w in proposal.content.lower() for w in ("switched", "moved", "changed", "migrated")), said


def test_the_demo_model_uses_the_same_rules():
    turn = "Hi! I prefer tea. We agreed to ship on Fridays. What now?"
    assert demo_statements_in(turn) == statements_in(turn)
    assert [s.memory_type for s in statements_in(turn)] == ["preference", "decision"]


# --- the offline model without memory_save ------------------------------------------------------


def test_without_save_tool_statements_are_acknowledged_not_saved():
    turn = [HumanMessage("I prefer tea. We use Go.")]
    reply = offline_reply(turn, save_with_tool=False)
    assert not reply.tool_calls and reply.text == "Got it, thanks."
    assert "memory" not in reply.text.lower()
    saved = offline_reply(turn)  # the default still saves with the tool
    assert [c["name"] for c in saved.tool_calls] == ["memory_save", "memory_save"]
    assert offline_reply(turn, save_with_tool=True).tool_calls[0]["args"] == saved.tool_calls[0]["args"]


def test_without_save_tool_everything_else_is_unchanged():
    question = HumanMessage("How should you answer me?")
    block = ('<long_term_memory>\n<memory scope="user" type="preference">Prefers green tea</memory>\n'
             "</long_term_memory>")
    for messages in ([question], [SystemMessage("Be nice.\n\n" + block), question]):
        assert offline_reply(messages, save_with_tool=False).text == offline_reply(messages).text
    assert "Prefers green tea" in offline_reply([SystemMessage(block), question], save_with_tool=False).text
    result = ToolMessage("Found 1 memory.", tool_call_id="call_1", name="memory_search")
    confirm = offline_reply([question, result], save_with_tool=False)
    assert confirm.text == offline_reply([question, result]).text and not confirm.tool_calls


def test_the_offline_chat_model_takes_the_switch():
    assert offline_chat_model(save_with_tool=False).invoke([HumanMessage("I prefer tea.")]).text == "Got it, thanks."
    [call] = offline_chat_model().invoke([HumanMessage("I prefer tea.")]).tool_calls
    assert call["name"] == "memory_save" and call["args"]["content"] == "Prefers tea."


# --- rules that keep meaning (issue 31) ----------------------------------------------------------

LABELLED = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "rules_sentences.jsonl"


def _labelled() -> list[dict]:
    return [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]


def test_the_labelled_set_is_large_varied_and_one_third_held_out():
    rows = _labelled()
    assert len(rows) >= 150
    assert {r["kind"] for r in rows} >= {"possessive", "coordination", "quote", "negation", "question",
                                         "hypothetical", "tense", "level"}
    assert sum(r["split"] == "heldout" for r in rows) >= len(rows) // 3


def test_the_rules_keep_the_meaning_of_the_labelled_sentences():
    """Exact wording and level (benchmarks/rules_accuracy.py tables it): >= 95% overall, and the
    held-out third, written after the fixes and never used to tune them, above 90%."""
    sys.path.insert(0, str(LABELLED.parent.parent))  # benchmarks/: the benchmark's own scoring
    try:
        from rules_accuracy import right
    finally:
        sys.path.remove(str(LABELLED.parent.parent))

    rows = _labelled()
    hits = {split: [right(r, statements_in(r["said"])) for r in rows if r["split"] == split]
            for split in ("dev", "heldout")}
    assert sum(hits["dev"] + hits["heldout"]) / len(rows) >= 0.95
    assert sum(hits["heldout"]) / len(hits["heldout"]) >= 0.9


@pytest.mark.parametrize("said", [r["said"] for r in _labelled() if r["kind"] in ("question", "hypothetical")])
def test_questions_and_hypotheticals_never_become_facts(said):
    assert statements_in(said) == []


@pytest.mark.parametrize(("said", "content"), [
    ("My wife Sara and I have two kids.", "The user and their wife Sara have two kids."),
    ("Tom and I founded the company in 2015.", "The user and Tom founded the company in 2015."),
    ("I live in Lisbon and work remotely.", "Lives in Lisbon and works remotely."),
    ("I prefer tea but I don't drink it after 6pm.", "Prefers tea but doesn't drink it after 6pm."),
    ("I was a teacher before I became a developer.", "Was a teacher before they became a developer."),
    ('My motto is "I never give up".', 'Their motto is "I never give up".'),
    ("I hate the phrase 'my bad'.", "Hates the phrase 'my bad'."),
])
def test_rewrites_are_grammatical_and_quotes_are_kept_as_said(said, content):
    [statement] = statements_in(said)
    assert statement.content == content and statement.scope == "user"


def test_no_rewrite_of_the_labelled_set_reads_like_the_old_garble():
    garbled = re.compile(r"\band they (?:have|are|run|live|work)\b|\bthey was\b|\bI (?:am|have|was)\b")
    for row in _labelled():
        for statement in statements_in(row["said"]):
            outside_quotes = re.sub(r"\"[^\"]*\"|(?<![\w'])'[^']*'(?![\w'])", "", statement.content)
            assert not garbled.search(outside_quotes), (row["said"], statement.content)


@pytest.mark.parametrize(("said", "content", "scope"), [
    ("For the team: all endpoints must return JSON errors with a code field.",
     "All endpoints must return JSON errors with a code field.", "team"),
    ("Remember for the team: all endpoints must return JSON errors.", "All endpoints must return JSON errors.",
     "team"),
    ("In this repo, tests live next to the code.", "Tests live next to the code.", "project"),
    ("In this repo we use Poetry.", "The team uses Poetry.", "project"),
    ("Our project targets Python 3.12.", "The project targets Python 3.12.", "project"),
    ("Our org requires SSO for every tool.", "The organisation requires SSO for every tool.", "org"),
    ("Across the org, laptops must be encrypted.", "Laptops must be encrypted.", "org"),
    ("Our team's deadline is June.", "The team's deadline is June.", "team"),
])
def test_statements_said_of_a_group_are_proposed_at_its_level_never_as_the_users(said, content, scope):
    [statement] = statements_in(said)
    assert (statement.content, statement.scope) == (content, scope)
    assert not statement.content.lower().startswith(("for the team", "in this repo", "across the org"))


def test_a_first_person_statement_after_a_level_is_not_the_groups():
    assert statements_in("In this repo, I prefer tabs.") == []


def test_the_offline_model_saves_a_teams_statement_for_the_project():
    """memory_save has the project in the demo's runs; extraction places by the run's levels."""
    [call] = offline_reply([HumanMessage("Our team always squash-merges pull requests.")]).tool_calls
    assert call["args"]["scope"] == "project"
    assert call["args"]["content"] == "The team always squash-merges pull requests."


@pytest.mark.parametrize(("said", "content"), [
    ("I want peace and love.", "Wants peace and love."),  # a noun after "and" is not a second verb
    ("I like coffee and work.", "Likes coffee and work."),
    ("I use Vim and love it.", "Uses Vim and loves it."),
])
def test_a_second_verb_is_told_from_a_noun_by_its_complement(said, content):
    assert [s.content for s in statements_in(said)] == [content]
