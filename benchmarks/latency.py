"""Latency of agent-memory at scale: search and save percentiles, the cost of the usage
bookkeeping on search, and (``--index-study``) exact per-scope scan versus an HNSW index.

    python benchmarks/latency.py [--sizes 10000,100000] [--users 1000] [--queries 300]
                                 [--saves 300] [--dsn DSN] [--json OUT] [--index-study]

Without ``--dsn`` the embedded PostgreSQL is started in a temporary data directory
(``MemoryConfig(data_dir=tmp)``) that is deleted at the end, so no existing database is
touched. ``--dsn`` must point at a database whose ``memory_items`` is empty or absent;
the rows the run wrote (all ids start with ``bench-``) are deleted at the end.

What is cached, and what is not:

* Stored memories are drawn from a pool of ``--pool`` distinct template sentences,
  embedded once with the local model; the loader's embedder answers from that table
  (a miss would fall back to the model and is counted). Contents repeat across
  tenants but never inside one scope (imports use ``dedupe=False``); each stored vector
  gets a little noise (``--jitter``) so that no two rows share one.
* Search queries, the ``--index-study`` big project and saved contents are never cached:
  "end to end" search and every save run the real local model on the request path.
  "DB only" search swaps in an embedder whose ``embed_query`` returns a vector
  computed before the clock started, so it times everything but the model.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from agent_memory import MemoryConfig, MemoryService, ops, queries
from agent_memory.db.connection import open_pool
from agent_memory.db.requests import Commit, Copy, Embed, Op, run
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.models import MemoryItem, Rejection, Scope
from agent_memory.validation import check_identity

SEED = 20240611
SCOPE_SHARES = {"user": 0.70, "project": 0.25, "session": 0.05}
USERS_PER_PROJECT = 5
SESSIONS_PER_USER = 2
TARGET_SEARCH_P95_MS = 15.0
TARGET_SAVE_P95_MS = 30.0

# --- synthetic memories --------------------------------------------------------------------

VOCAB = {k: v.split("|") for k, v in {
    "name": "Alice|Bruno|Chen|Dana|Emeka|Farah|Giulia|Hiro|Ines|Jonas|Kavya|Lars|Maya|Nadia|Omar|Priya|Quinn|"
            "Rosa|Sven|Tariq|Uma|Viktor|Wen|Ximena|Yusuf|Zoe|Mateo|Lena|Noah|Aisha",
    "city": "Berlin|Lisbon|Toronto|Osaka|Nairobi|Austin|Lyon|Krakow|Melbourne|Bogota|Dublin|Seoul|Oslo|"
            "Porto|Denver|Mumbai|Zurich|Valencia|Tallinn|Montreal|Cape Town|Helsinki|Prague|Boston",
    "country": "Japan|Portugal|Iceland|Mexico|Vietnam|Norway|Morocco|Chile|Greece|Canada|Peru|Kenya|Italy|Georgia",
    "drink": "green tea|oat flat white|espresso|rooibos|sparkling water|matcha latte|black coffee|chai|"
             "hot chocolate|cold brew|mint tea|decaf americano",
    "daypart": "morning|afternoon|evening|late night|lunch break",
    "editor": "VS Code|Neovim|PyCharm|Emacs|Zed|Sublime Text|IntelliJ|Helix",
    "theme": "dark|light|solarized|high-contrast|gruvbox|nord",
    "language": "English|German|Spanish|French|Japanese|Portuguese|Hindi|Polish|Korean|Italian|Dutch|Swahili",
    "length": "short|detailed|bullet-pointed|concise|step-by-step",
    "transport": "cycling|the tram|the train|walking|car sharing|an e-scooter|the bus",
    "cuisine": "Thai|Ethiopian|Georgian|Peruvian|Sichuan|Lebanese|Neapolitan|Korean|Mexican|Basque",
    "dish": "dumplings|ramen|falafel|ceviche|injera|khachapuri|pho|tacos|paella|bibimbap",
    "weekday": "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday",
    "time": "8 am|9:30|10 am|noon|2 pm|4 pm|6 pm",
    "role": "data engineer|product designer|site reliability engineer|backend developer|nurse|teacher|"
            "architect|product manager|research scientist|accountant|frontend developer|lawyer",
    "company": "Acme Robotics|Northwind|Globex|Initech|Umbrella Health|Stark Logistics|Wayne Analytics|"
               "Hooli|Vandelay Imports|Soylent Foods|Cyberdyne Labs|Tyrell Systems",
    "pet": "cat|dog|parrot|rabbit|tortoise|hamster|beagle|greyhound",
    "petname": "Miso|Pixel|Biscuit|Luna|Pepper|Mochi|Otto|Noodle|Ziggy|Clementine|Rufus|Nori",
    "year": "2015|2016|2017|2018|2019|2020|2021|2022|2023",
    "allergen": "peanuts|shellfish|gluten|pollen|cats|penicillin|sesame|lactose",
    "car": "Volvo estate|Toyota hybrid|Tesla Model 3|Fiat 500|Subaru Outback|VW camper van|Mini Cooper",
    "month": "January|February|March|April|May|June|July|August|September|October|November|December",
    "n": "3|4|5|6|8|10|12|15|20|25",
    "instrument": "bass guitar|piano|drums|violin|saxophone|ukulele|cello|trumpet",
    "genre": "jazz|punk|folk|funk|indie|blues|ska|soul",
    "genre2": "science fiction|crime|historical|fantasy|literary|mystery",
    "tech": "Python|Rust|Go|TypeScript|Kotlin|PostgreSQL|Kafka|Kubernetes|Terraform|React|Django|FastAPI|"
            "Spark|Redis|GraphQL|gRPC|Elixir|Java|Scala|Swift|Airflow|dbt|Snowflake|ClickHouse|Flutter",
    "project": "Atlas|Beacon|Cobalt|Drift|Ember|Falcon|Granite|Harbor|Iris|Juniper|Kestrel|Lumen|Mosaic|Nimbus|"
               "Orbit|Pulse|Quartz|Relay|Summit|Tundra",
    "db": "PostgreSQL|MySQL|DynamoDB|MongoDB|SQLite|Cassandra|ClickHouse",
    "queue": "RabbitMQ|Kafka|SQS|Celery|NATS|Redis streams",
    "component": "billing|search|checkout|auth|notifications|ingestion|reporting|payments|onboarding|"
                 "recommendations|inventory|scheduler|gateway|analytics|export|pricing|shipping|identity|"
                 "catalog|feedback|audit|media|chat|invoicing|sync|webhooks|admin|mobile|geocoding|ledger",
    "team": "platform|data|mobile|security|growth|infrastructure|design|QA",
    "amount": "500|1200|2000|3500|5000|8000|12000|20000",
    "cloud": "AWS|GCP|Azure|Hetzner|Fly.io|DigitalOcean",
    "region": "eu-west-1|us-east-1|eu-central-1|ap-southeast-2|us-west-2|europe-north1",
    "feature": "dark mode|SSO login|CSV export|offline sync|audit logs|bulk import|usage alerts|multi-currency|"
               "role-based access|webhooks|saved searches|two-factor auth",
    "bug": "memory leak|race condition|timeout|deadlock|off-by-one error|flaky test|cache stampede|encoding bug",
    "doc": "design doc|postmortem|proposal|release note|onboarding guide|RFC",
    "topic": "rate limiting|data retention|pricing tiers|incident response|schema migration|hiring plan|"
             "load testing|accessibility|caching strategy|API versioning",
}.items()}

#: (memory_type, scope it is written in, template); ``{slot}`` and ``{slot2}`` draw from VOCAB["slot"].
TEMPLATES = [
    ("preference", "user", "Prefers {drink} over {drink2} in the {daypart}."),
    ("preference", "user", "Likes to code in {editor} with a {theme} theme."),
    ("preference", "user", "Wants answers in {language}, kept {length}."),
    ("preference", "user", "Prefers {transport} for getting to the office in {city}."),
    ("preference", "user", "Favourite food is {cuisine}, especially {dish}."),
    ("preference", "user", "Dislikes meetings before {time} on {weekday}s."),
    ("fact", "user", "Works as a {role} at {company} in {city}."),
    ("fact", "user", "Has a {pet} named {petname}."),
    ("fact", "user", "Grew up in {city} and moved to {city2} in {year}."),
    ("fact", "user", "Is allergic to {allergen} and avoids {dish}."),
    ("fact", "user", "Speaks {language} and is learning {language2}."),
    ("fact", "user", "Their sister {name} lives in {city} and works as a {role}."),
    ("fact", "user", "Drives a {car} that is due for a service in {month}."),
    ("habit", "user", "Runs {n} kilometres every {weekday} {daypart}."),
    ("habit", "user", "Plays {instrument} in a {genre} band on {weekday}s."),
    ("habit", "user", "Reads {genre2} novels and drinks {drink} before bed."),
    ("skill", "user", "Is experienced with {tech} and {tech2}, and learning {tech3}."),
    ("event", "user", "Has a dentist appointment on {weekday} at {time} in {month}."),
    ("event", "user", "Flew to {city} in {month} {year} for a {tech} conference."),
    ("event", "user", "Is planning a trip to {country} with {name} in {month}."),
    ("fact", "project", "The {project} project stores its data in {db} and runs jobs on {queue}."),
    ("decision", "project", "Decided to move the {component} service from {tech} to {tech2} by {month}."),
    ("decision", "project", "The team agreed that {component} releases go out every {weekday}."),
    ("constraint", "project", "Deployments of {component} need approval from {name} on the {team} team."),
    ("constraint", "project", "The {component} API must stay backward compatible until {month} {year}."),
    ("constraint", "project", "Cloud spend for {project} is capped at {amount} euros a month."),
    ("fact", "project", "{name} owns the {component} module and reviews every change to it."),
    ("fact", "project", "Staging for {project} runs on {cloud} in {region}."),
    ("fact", "project", "The {component} test suite takes about {n} minutes on CI."),
    ("decision", "project", "The {project} roadmap puts {feature} ahead of {feature2}."),
    ("context", "project", "{name} and {name2} pair on the {component} rewrite in {tech}."),
    ("context", "session", "Is debugging a {bug} in the {component} service."),
    ("context", "session", "Is drafting a {doc} about {topic} for {name}."),
    ("context", "session", "Asked for a summary of the {topic} discussion from {weekday}."),
    ("context", "session", "Wants help comparing {tech} and {tech2} for the {component} service."),
]

QUERY_TEMPLATES = [
    "What does the user like to drink in the {daypart}?", "Which editor does the user use for {tech}?",
    "How should answers be written, in {language}?", "How does the user get to work in {city}?",
    "What food does the user like, maybe {cuisine}?", "When does the user not want meetings on {weekday}?",
    "Where does the user work as a {role}?", "What is the name of the user's {pet}?",
    "Where did the user live before {city}?", "Is the user allergic to {allergen}?",
    "Which languages does the user speak besides {language}?", "Where does the user's sister {name} live?",
    "When is the {car} due for a service?", "How often does the user go running on {weekday}?",
    "Does the user play {instrument}?", "What does the user read before bed, {genre2}?",
    "Does the user know {tech}?", "When is the dentist appointment in {month}?",
    "Which conference was in {city}?", "Who is going to {country} with the user?",
    "What database does {project} use?", "Why is {component} moving to {tech}?",
    "When are {component} releases?", "Who approves deployments of {component}?",
    "How long must the {component} API stay compatible?", "What is the cloud budget for {project}?",
    "Who owns the {component} module?", "Where does staging for {project} run?",
    "How slow is the {component} test suite?", "Is {feature} on the {project} roadmap?",
    "What was the {bug} in {component} about?", "Status of the {doc} on {topic}?",
    "Remind me what we said about {topic} on {weekday}.", "Should {component} use {tech} or {tech2}?",
]

_SLOT = re.compile(r"\{([a-z]+?)\d?\}")


class SentenceMaker:
    """Distinct sentences from the templates, reproducible from a seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seen: set[str] = set()

    def fill(self, template: str) -> str:
        text = _SLOT.sub(lambda m: self.rng.choice(VOCAB[m.group(1)]), template)
        return text[0].upper() + text[1:]

    def memories(self, scope: str, n: int) -> list[tuple[str, str]]:
        """``n`` new (content, memory_type) of a scope, none seen before by this maker."""
        templates = [(mt, tpl) for mt, sc, tpl in TEMPLATES if sc == scope]
        return self._distinct(n, lambda: (lambda mt, tpl: (self.fill(tpl), mt))(*self.rng.choice(templates)))

    def questions(self, n: int) -> list[str]:
        return [q for q, _ in self._distinct(n, lambda: (self.fill(self.rng.choice(QUERY_TEMPLATES)), ""))]

    def _distinct(self, n: int, make: Callable[[], tuple[str, str]]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for _ in range(200 * n + 1000):
            if len(out) == n:
                return out
            item = make()
            if item[0] not in self.seen:
                self.seen.add(item[0])
                out.append(item)
        raise SystemExit(f"the templates ran out of distinct sentences after {len(out)} of {n}; add vocabulary")


# --- embedders ---------------------------------------------------------------------------


class CachedEmbeddings(LocalEmbeddings):
    """The local model, answering documents from a text -> vector table and, when ``queries``
    is given, queries from precomputed vectors (a missing query is a bug here, so it raises).

    ``jitter`` adds Gaussian noise of that norm to every document vector it hands out
    (then normalises): 0.3 keeps cosine ~0.96 to the model's vector, and no two rows
    share a vector. Identical vectors would flatter HNSW, which files up to 10 rows with
    one vector under a single graph element; real memories are rarely identical.

    A subclass, so the schema records the local model's name and size exactly as a
    plain ``LocalEmbeddings`` would.
    """

    def __init__(self, vectors: dict[str, np.ndarray], queries: dict[str, list[float]] | None = None,
                 *, jitter: float = 0.0, seed: int = SEED) -> None:
        super().__init__()
        self.vectors = vectors
        self.queries = queries
        self.jitter = jitter
        self.rng = np.random.default_rng(seed)
        self.hits = 0
        self.misses = 0

    def embed_documents_array(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, super().embed_documents_array(missing)))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        out = np.stack([self.vectors[t] for t in texts])
        if self.jitter:
            out = out + self.rng.normal(0.0, self.jitter / np.sqrt(out.shape[1]), out.shape).astype(np.float32)
            out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def embed_query(self, text: str) -> list[float]:
        return super().embed_query(text) if self.queries is None else self.queries[text]


# --- tenants and the load ----------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    user_id: str
    project_id: str
    session_id: str

    def kwargs(self) -> dict[str, str]:
        return {"user_id": self.user_id, "project_id": self.project_id, "session_id": self.session_id}

    def identity(self) -> Any:
        return check_identity(self.user_id, self.project_id, self.session_id)


def caller(user: int, session: int = 0) -> Caller:
    return Caller(f"bench-u{user:05d}", f"bench-p{user // USERS_PER_PROJECT:04d}", f"bench-s{user:05d}-{session}")


@dataclass(frozen=True)
class Row:
    who: Caller
    item: dict[str, Any]  # what import_memories takes


def plan_rows(n: int, users: int, pools: dict[str, list[tuple[str, str]]], rng: np.random.Generator) -> list[Row]:
    """``n`` memories in random arrival order, so any prefix is a sample of the same population.

    Users get lognormal activity (a few heavy users, sigma 0.5); each memory is user /
    project / session scoped 70 / 25 / 5 % and never repeats a content inside its scope.
    """
    activity = rng.lognormal(0.0, 0.5, users)
    user_of = rng.choice(users, size=n, p=activity / activity.sum())
    scope_of = rng.choice(list(SCOPE_SHARES), size=n, p=list(SCOPE_SHARES.values()))
    session_of = rng.integers(0, SESSIONS_PER_USER, size=n)
    members: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in range(n):
        who = caller(int(user_of[i]), int(session_of[i]))
        members[(str(scope_of[i]), _scope_id(who, str(scope_of[i])))].append(i)
    content: dict[int, tuple[str, str]] = {}
    for (scope, key), idx in members.items():
        pool = pools[scope]
        if len(idx) > len(pool):
            raise SystemExit(f"{scope} scope {key} needs {len(idx)} distinct contents but the pool has "
                             f"{len(pool)}; raise --pool")
        for i, j in zip(idx, rng.choice(len(pool), size=len(idx), replace=False)):
            content[i] = pool[int(j)]
    rows = []
    for i in range(n):
        scope = str(scope_of[i])
        text, memory_type = content[i]
        rows.append(Row(caller(int(user_of[i]), int(session_of[i])), {
            "content": text, "memory_type": memory_type, "scope": scope,
            "confidence": round(float(rng.uniform(0.7, 1.0)), 2),
            "source": "user" if rng.random() < 0.6 else "ai",
            "visibility": "owner_only" if scope == "project" and rng.random() < 0.1 else "members",
        }))
    return rows


def _scope_id(who: Caller, scope: str) -> str:
    return {"user": who.user_id, "project": who.project_id, "session": who.session_id}[scope]


def load(service: MemoryService, rows: Sequence[Row], chunk: int, rng: random.Random) -> dict[str, Any]:
    """Import ``rows`` through ``MemoryService.import_memories``.

    One import call serves one caller, so callers take turns, ``chunk`` rows at a time:
    the heap then interleaves tenants as memories arriving over time would, instead
    of storing each user's rows together (which would flatter the per-scope scans).
    """
    queues: dict[Caller, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        queues[row.who].append(row.item)
    calls = inserted = rejected = 0
    start = time.perf_counter()
    while queues:
        order = list(queues)
        rng.shuffle(order)
        for who in order:
            batch, queues[who] = queues[who][:chunk], queues[who][chunk:]
            if not queues[who]:
                del queues[who]
            result = service.import_memories(batch, **who.kwargs())
            calls += 1
            inserted += len(result.inserted)
            rejected += len(result.rejected)
    seconds = time.perf_counter() - start
    return {"rows": len(rows), "inserted": inserted, "rejected": rejected, "import_calls": calls,
            "seconds": seconds, "rows_per_s": len(rows) / seconds if seconds else 0.0}


# --- timing --------------------------------------------------------------------------------


def stats_ms(samples: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples, dtype=float) * 1000.0
    if a.size == 0:
        return {"n": 0}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {"n": int(a.size), "mean": float(a.mean()), "p50": float(p50), "p95": float(p95),
            "p99": float(p99), "max": float(a.max())}


_LABELS = (
    ("WITH q AS MATERIALIZED", "candidates"), ("synchronous_commit", "touch"), ("access_count = access_count + 1", "touch"),
    ("pg_advisory_xact_lock", "lock"), ("<= 1 - ", "duplicate_check"), ("INSERT INTO", "insert"),
    ("SET last_used_at = now() WHERE", "refresh_duplicate"),
)


def label(text: str) -> str:
    return next((name for needle, name in _LABELS if needle in text), "other")


def timed_run(op: Op[Any], pool: ConnectionPool, embeddings: Any) -> tuple[Any, dict[str, float], list[Any]]:
    """Drive ``op`` like :func:`agent_memory.db.requests.run` (one pooled connection, one
    transaction committed at the end) but time each request: ``embed``, each statement
    by kind, ``commit``. Also answers the statements, for EXPLAIN."""
    times: dict[str, float] = defaultdict(float)
    statements: list[tuple[str, Any, Any]] = []
    answer: Any = None
    with pool.connection() as conn:
        in_tx = False
        while True:
            try:
                request = op.send(answer)
            except StopIteration as stop:
                if in_tx:
                    t = time.perf_counter()
                    conn.execute("COMMIT")
                    times["commit"] += time.perf_counter() - t
                return stop.value, dict(times), statements
            t = time.perf_counter()
            if isinstance(request, Embed):
                texts = list(request.texts)
                answer = ([embeddings.embed_query(texts[0])] if request.query and len(texts) == 1
                          else embeddings.embed_documents(texts))
                times["embed"] += time.perf_counter() - t
                continue
            if isinstance(request, (Copy, Commit)):
                raise NotImplementedError("timed_run only serves search and save")
            if not in_tx:
                conn.execute("BEGIN")
                in_tx = True
            text = request.query.as_string(conn) if isinstance(request.query, sql.Composable) else request.query
            t = time.perf_counter()
            with conn.cursor(row_factory=dict_row) as cur:
                cur.execute(request.query, request.params)
                answer = {"all": cur.fetchall, "one": cur.fetchone}.get(request.fetch, lambda: None)()
            name = label(text)
            times[name] += time.perf_counter() - t
            statements.append((name, request.query, request.params))


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    # user nice system idle iowait irq softirq steal (guest time is already inside user)
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Phase:
    """Records a phase's load average at its start and how busy the whole machine was during it,
    and how much of that was this Python process (the PostgreSQL backends are not included)."""

    def __init__(self, report: dict[str, Any], name: str, rows: int) -> None:
        self.entry = {"phase": name, "rows": rows, "loadavg_start": loadavg()}
        report["phases"].append(self.entry)

    def __enter__(self) -> Phase:
        self.ticks, self.own, self.wall = _cpu_ticks(), sum(os.times()[:2]), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, total = _cpu_ticks()
        wall = time.perf_counter() - self.wall
        self.entry["seconds"] = round(wall, 1)
        self.entry["machine_busy_pct"] = round(100.0 * (busy - self.ticks[0]) / max(1, total - self.ticks[1]), 1)
        self.entry["this_process_pct"] = round(
            100.0 * (sum(os.times()[:2]) - self.own) / max(1e-9, wall * (os.cpu_count() or 1)), 1)


# --- measurements ----------------------------------------------------------------------------


@dataclass
class Bench:
    pool: ConnectionPool
    config: MemoryConfig
    local: LocalEmbeddings
    real: MemoryService          # LocalEmbeddings: the model runs on every call
    pre: MemoryService           # queries answered from precomputed vectors
    pre_embeddings: CachedEmbeddings
    qvecs: dict[str, list[float]]

    def visible_rows(self, who: Caller) -> int:
        filt, params = queries.item_filter(who.identity())
        with self.pool.connection() as conn:
            return conn.execute(sql.SQL("SELECT count(*) FROM memory_items m WHERE {f}").format(f=filt),
                                params).fetchone()[0]

    def search_modes(self) -> dict[str, Callable[[Caller, str], Any]]:
        def no_touch(who: Caller, q: str) -> Any:
            op = ops.search_memories(self.config, who.identity(), q, k=5, touch=False)
            return run(op, self.pool, self.pre_embeddings)

        def breakdown(who: Caller, q: str) -> Any:
            return timed_run(ops.search_memories(self.config, who.identity(), q, k=5), self.pool,
                             self.pre_embeddings)

        return {
            "query_embedding": lambda who, q: self.local.embed_query(q),
            "end_to_end": lambda who, q: self.real.search_memories(q, k=5, **who.kwargs()),
            "db_only": lambda who, q: self.pre.search_memories(q, k=5, **who.kwargs()),
            "db_only_no_touch": no_touch,
            "breakdown": breakdown,
        }

    def searches(self, work: Sequence[tuple[Caller, str]], warmup: Sequence[tuple[Caller, str]]) -> dict[str, Any]:
        """Every mode on every (caller, query); the order of modes rotates per query so no mode
        always finds the caller's pages freshly cached by another."""
        modes = self.search_modes()
        names = list(modes)
        for who, q in warmup:
            for name in names:
                modes[name](who, q)
        samples: dict[str, list[float]] = defaultdict(list)
        parts: dict[str, list[float]] = defaultdict(list)
        hits = []
        for i, (who, q) in enumerate(work):
            for name in names[i % len(names):] + names[: i % len(names)]:
                t = time.perf_counter()
                out = modes[name](who, q)
                samples[name].append(time.perf_counter() - t)
                if name == "breakdown":
                    for part in ("candidates", "touch", "commit"):
                        parts[part].append(out[1].get(part, 0.0))
                elif name == "db_only":
                    hits.append(len(out))
        result = {name: stats_ms(s) for name, s in samples.items()}
        result["breakdown_parts"] = {part: stats_ms(s) for part, s in parts.items()}
        result["results_per_query"] = float(np.mean(hits)) if hits else 0.0
        return result

    def saves(self, work: Sequence[tuple[Caller, dict[str, Any]]], warmup: Sequence[tuple[Caller, dict[str, Any]]],
              n_breakdown: int, rng: random.Random) -> dict[str, Any]:
        """``add_explicit_memory`` with the real model, the gate and the duplicate check."""
        def save(who: Caller, item: dict[str, Any]) -> Any:
            return self.real.add_explicit_memory(item["content"], memory_type=item["memory_type"],
                                                 scope=item["scope"], confidence=item["confidence"],
                                                 **who.kwargs())

        for who, item in warmup:
            save(who, item)
        plan = [("service", w) for w in work[n_breakdown:]] + [("breakdown", w) for w in work[:n_breakdown]]
        rng.shuffle(plan)
        samples: dict[str, list[float]] = defaultdict(list)
        parts: dict[str, list[float]] = defaultdict(list)
        outcomes: Counter[str] = Counter()
        for how, (who, item) in plan:
            t = time.perf_counter()
            if how == "service":
                out = save(who, item)
            else:
                op = ops.add_memory(self.config, who.identity(), ops.make_new_memory(
                    item["content"], memory_type=item["memory_type"], scope=item["scope"],
                    confidence=item["confidence"]))
                out, times, _ = timed_run(op, self.pool, self.real.embeddings)
                for part in ("embed", "lock", "duplicate_check", "insert", "commit"):
                    parts[part].append(times.get(part, 0.0))
            samples[how].append(time.perf_counter() - t)
            outcomes["rejected" if isinstance(out, Rejection) else
                     "deduplicated" if isinstance(out, MemoryItem) and out.deduplicated else "inserted"] += 1
        return {"save": stats_ms(samples["service"]), "breakdown_total": stats_ms(samples["breakdown"]),
                "breakdown_parts": {p: stats_ms(s) for p, s in parts.items()}, "outcomes": dict(outcomes)}

    def touch_study(self, work: Sequence[tuple[Caller, str]]) -> dict[str, Any]:
        """The bookkeeping UPDATE on its own, with the op's exact SQL and transaction settings,
        on the ids real searches returned; and whether the updated rows stayed on their page
        (a HOT update) or moved (new index entries in all four indexes, GIN included)."""
        samples, moved, total = [], 0, 0
        for who, q in work:
            ids = [r.item.id for r in self.pre.search_memories(q, k=5, **who.kwargs())]
            if not ids:
                continue
            with self.pool.connection() as conn:
                pages = "SELECT id, (ctid::text::point)[0] AS page FROM memory_items WHERE id = ANY(%s)"
                before = dict(conn.execute(pages, (ids,)).fetchall())
                t = time.perf_counter()
                with conn.transaction():
                    conn.execute(*queries.touch_items(ids))
                samples.append(time.perf_counter() - t)
                after = dict(conn.execute(pages, (ids,)).fetchall())
            moved += sum(before[i] != after[i] for i in ids)
            total += len(ids)
        with self.pool.connection() as conn:
            fillfactor = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_items'").fetchone()[0]
        return {"update_tx": stats_ms(samples), "rows_updated": total, "rows_moved_page": moved,
                "reloptions": fillfactor}

    def explain(self, who: Caller, q: str) -> dict[str, str]:
        """EXPLAIN (ANALYZE, BUFFERS) of the two SELECTs a search issues."""
        _, _, statements = timed_run(ops.search_memories(self.config, who.identity(), q, k=5, touch=False),
                                     self.pool, self.pre_embeddings)
        plans = {}
        with self.pool.connection() as conn:
            for name, query, params in statements:
                text = query if isinstance(query, str) else query.as_string(conn)
                rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + sql.SQL(text), params).fetchall()
                plans[name] = "\n".join(r[0] for r in rows)
        return plans


# --- index study -----------------------------------------------------------------------------

HNSW_INDEX = "memory_items_embedding_hnsw_bench"
PARTIAL_INDEX = "memory_items_bigproject_hnsw_bench"
#: (label, settings); each runs in its own transaction with SET LOCAL
HNSW_VARIANTS = (
    ("hnsw ef_search=40", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "off"}),
    ("hnsw ef_search=200", {"hnsw.ef_search": "200", "hnsw.iterative_scan": "off"}),
    ("hnsw ef_search=40 strict_order", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "strict_order"}),
    ("hnsw ef_search=40 relaxed_order", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "relaxed_order"}),
)
#: make the HNSW path the only one without a disable penalty, so the planner must take it
FORCE_INDEX = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_sort": "off"}


def topk_query(who: Caller, vector: Sequence[float], k: int,
               scopes: Sequence[Scope] | None = None) -> tuple[sql.Composable, dict[str, Any]]:
    """Pure vector top-k under the caller's visibility filter (no scores, no keywords)."""
    filt, params = queries.item_filter(who.identity(), scopes=scopes)
    return (sql.SQL("SELECT m.id, m.embedding <=> %(t_vec)s::vector AS d FROM memory_items m WHERE {f}"
                    " ORDER BY m.embedding <=> %(t_vec)s::vector LIMIT %(t_k)s").format(f=filt),
            dict(params, t_vec=queries.vector_literal(vector), t_k=k))


def run_topk(pool: ConnectionPool, work: Sequence[tuple[Caller, list[float]]], k: int, settings: dict[str, str],
             scopes: Sequence[Scope] | None = None) -> tuple[list[float], list[list[tuple[Any, float]]], str]:
    times, answers = [], []
    with pool.connection() as conn:
        def once(who: Caller, vec: list[float]) -> tuple[float, list[tuple[Any, float]]]:
            with conn.transaction():
                for name, value in settings.items():
                    conn.execute("SELECT set_config(%s, %s, true)", (name, value))
                q, p = topk_query(who, vec, k, scopes)
                t = time.perf_counter()
                # never prepared: a cached generic plan would ignore the settings of later variants
                rows = conn.execute(q, p, prepare=False).fetchall()
                return time.perf_counter() - t, rows

        for who, vec in work[:10]:
            once(who, vec)
        for who, vec in work:
            dt_, rows = once(who, vec)
            times.append(dt_)
            answers.append(rows)
        with conn.transaction():
            for name, value in settings.items():
                conn.execute("SELECT set_config(%s, %s, true)", (name, value))
            q, p = topk_query(*work[0], k, scopes)
            plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + q, p).fetchall())
    return times, answers, plan


def recall(exact: list[list[tuple[Any, float]]], got: list[list[tuple[Any, float]]], k: int) -> dict[str, float]:
    """Share of the exact top-k found (a row at the k-th exact distance counts, so ties are fair)."""
    scores, short = [], 0
    for ex, g in zip(exact, got):
        if not ex:
            continue
        want = min(k, len(ex))
        kth = ex[want - 1][1]
        scores.append(min(want, sum(1 for _, d in g if d <= kth + 1e-6)) / want)
        short += len(g) < want
    return {"recall": float(np.mean(scores)), "queries_short": short,
            "mean_rows": float(np.mean([len(g) for g in got]))}


def index_study(b: Bench, maker: SentenceMaker, vectors: dict[str, np.ndarray], users: int,
                work_users: Sequence[tuple[Caller, str]], big_n: int, log: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    loader = MemoryService(b.pool, config=b.config, embeddings=CachedEmbeddings(vectors))
    big_members = [Caller(f"bench-big-u{i}", "bench-bigproject", f"bench-big-s{i}") for i in range(5)]
    t = time.perf_counter()
    contents = maker.memories("project", big_n)
    user_contents = maker.memories("user", 50 * len(big_members))
    new = [c for c, _ in contents + user_contents]
    CachedEmbeddings(vectors).embed_documents_array(new)  # runs the model once per new text, filling `vectors`
    out["big_project_embed_s"] = time.perf_counter() - t
    log(f"  embedded {len(new)} new distinct sentences for the big project in {out['big_project_embed_s']:.0f} s")
    t = time.perf_counter()
    for i, who in enumerate(big_members):
        mine = [{"content": c, "memory_type": mt, "scope": "project"} for c, mt in contents[i::len(big_members)]]
        mine += [{"content": c, "memory_type": mt, "scope": "user"} for c, mt in user_contents[i * 50:(i + 1) * 50]]
        for start in range(0, len(mine), 2000):
            loader.import_memories(mine[start:start + 2000], **who.kwargs())
    with b.pool.connection() as conn:
        conn.execute("VACUUM ANALYZE memory_items")
        out["rows_total"] = conn.execute("SELECT count(*) FROM memory_items").fetchone()[0]
    out["big_project_load_s"] = time.perf_counter() - t
    qtexts = list(b.qvecs)
    per_user = [(who, b.qvecs[q]) for who, q in work_users[:100]]
    big = [(big_members[i % 5], b.qvecs[qtexts[i]]) for i in range(100)]
    out["visible_rows"] = {"per_user_median": float(np.median([b.visible_rows(w) for w, _ in per_user])),
                           "big_project_median": float(np.median([b.visible_rows(w) for w, _ in big]))}
    # the real search path (exact scan) for big-project callers, for scale
    out["big_project_search"] = b.searches([(big_members[i % 5], qtexts[i]) for i in range(100)],
                                           [(big_members[i % 5], qtexts[100 + i]) for i in range(10)])
    out["saves_without_hnsw"] = b.saves(save_work(maker, users, 100, random.Random(SEED + 7)), [], 0,
                                        random.Random(1))["save"]
    cases = {"per_user": per_user, "big_project": big}
    exact: dict[tuple[str, int], Any] = {}
    table: list[dict[str, Any]] = []
    for case, work in cases.items():
        for k in (5, 50):
            times, answers, plan = run_topk(b.pool, work, k, {})
            exact[(case, k)] = answers
            table.append({"case": case, "k": k, "variant": "exact scan (current indexes)", **stats_ms(times),
                          **recall(answers, answers, k), "plan_uses_hnsw": HNSW_INDEX in plan})
    log(f"  building HNSW on {out['rows_total']} rows (m=16, ef_construction=64) ...")
    with b.pool.connection() as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        t = time.perf_counter()
        conn.execute(sql.SQL("CREATE INDEX {} ON memory_items USING hnsw (embedding vector_cosine_ops)")
                     .format(sql.Identifier(HNSW_INDEX)))
        out["hnsw_build_s"] = time.perf_counter() - t
        conn.execute("ANALYZE memory_items")
        out["hnsw_size"] = conn.execute("SELECT pg_size_pretty(pg_relation_size(%s::regclass))",
                                        (HNSW_INDEX,)).fetchone()[0]
        out["hnsw_max_scan_tuples"] = conn.execute("SHOW hnsw.max_scan_tuples").fetchone()[0]
    try:
        for case, work in cases.items():
            for k in (5, 50):
                variants = [("planner's choice, ef_search=40", {})]
                variants += [(name, dict(FORCE_INDEX, **s)) for name, s in HNSW_VARIANTS]
                for name, settings in variants:
                    times, answers, plan = run_topk(b.pool, work, k, settings)
                    table.append({"case": case, "k": k, "variant": name, **stats_ms(times),
                                  **recall(exact[(case, k)], answers, k), "plan_uses_hnsw": HNSW_INDEX in plan})
        who, q = work_users[0]
        out["search_plan_uses_hnsw"] = any(HNSW_INDEX in p for p in b.explain(who, q).values())
        out["saves_with_hnsw"] = b.saves(save_work(maker, users, 100, random.Random(SEED + 8)), [], 0,
                                         random.Random(2))["save"]
        # A partial index over the one big scope leaves HNSW no filter to lose rows to; it serves a
        # query on that scope alone (the visible filter's OR of scopes can't use it).
        with b.pool.connection() as conn:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(HNSW_INDEX)))
            t = time.perf_counter()
            conn.execute(sql.SQL("CREATE INDEX {} ON memory_items USING hnsw (embedding vector_cosine_ops)"
                                 " WHERE scope = 'project' AND scope_id = 'bench-bigproject'")
                         .format(sql.Identifier(PARTIAL_INDEX)))
            out["partial_build_s"] = time.perf_counter() - t
            conn.execute("ANALYZE memory_items")
        project = (Scope.PROJECT,)
        for k in (5, 50):
            scope_exact: list[list[tuple[Any, float]]] = []
            for name, settings in (("exact scan, project scope only", {"enable_indexscan": "off"}),
                                   ("partial hnsw, ef_search=40", {"hnsw.ef_search": "40"}),
                                   ("partial hnsw, ef_search=100", {"hnsw.ef_search": "100"}),
                                   ("partial hnsw, ef_search=200", {"hnsw.ef_search": "200"})):
                times, got, plan = run_topk(b.pool, big, k, settings, project)
                if name.startswith("exact"):
                    scope_exact = got
                table.append({"case": "big_project, its scope only", "k": k, "variant": name, **stats_ms(times),
                              **recall(scope_exact, got, k), "plan_uses_hnsw": PARTIAL_INDEX in plan})
    finally:
        with b.pool.connection() as conn:
            for index in (HNSW_INDEX, PARTIAL_INDEX):
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
    out["topk"] = table
    return out


def save_work(maker: SentenceMaker, users: int, n: int, rng: random.Random) -> list[tuple[Caller, dict[str, Any]]]:
    work = []
    for _ in range(n):
        scope = rng.choices(list(SCOPE_SHARES), weights=list(SCOPE_SHARES.values()))[0]
        [(content, memory_type)] = maker.memories(scope, 1)
        work.append((caller(rng.randrange(users), rng.randrange(SESSIONS_PER_USER)),
                     {"content": content, "memory_type": memory_type, "scope": scope,
                      "confidence": round(rng.uniform(0.7, 1.0), 2)}))
    return work


# --- report ----------------------------------------------------------------------------------


def fmt(s: dict[str, float], keys: Iterable[str] = ("p50", "p95", "p99")) -> str:
    return " / ".join(f"{s[k]:.1f}" for k in keys)


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"Command: `{r['command']}` (code {r['code']})  ",
        f"Date: {r['date']}; machine: {m['nproc']} cores ({m['cpu']}), {m['python']}, {m['postgres']}, "
        f"pgvector {m['pgvector']}, shared_buffers {m['shared_buffers']}; load average before "
        f"{r['loadavg_before']}, after {r['loadavg_after']}.  ",
        f"Data: {r['data']}",
        "",
        "| rows | load s (rows/s) | search end-to-end p50 / p95 / p99 ms | search DB-only p50 / p95 / p99 ms "
        "| DB-only without usage UPDATE | save p50 / p95 / p99 ms | save outcomes |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        sr, sv = s["search"], s["saves"]
        lines.append(
            f"| {s['rows']:,} | {s['load']['seconds']:.0f} ({s['load']['rows_per_s']:.0f}) | {fmt(sr['end_to_end'])} "
            f"| {fmt(sr['db_only'])} | {fmt(sr['db_only_no_touch'])} | {fmt(sv['save'])} | {sv['outcomes']} |")
    lines += ["", "Where the time goes (p50 / p95 ms; `breakdown` runs the same op statement by statement):", "",
              "| rows | query embedding | search SQL (candidates + BM25 stats) | usage UPDATE | commit "
              "| UPDATE alone, own tx | save: embed | lock | duplicate check | insert | commit |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r["sizes"]:
        bp, sp = s["search"]["breakdown_parts"], s["saves"]["breakdown_parts"]
        cell = lambda d: fmt(d, ("p50", "p95"))  # noqa: E731
        lines.append(f"| {s['rows']:,} | {cell(s['search']['query_embedding'])} | {cell(bp['candidates'])} "
                     f"| {cell(bp['touch'])} | {cell(bp['commit'])} "
                     f"| {cell(s['touch']['update_tx'])} | " + " | ".join(cell(sp[p]) for p in
                     ("embed", "lock", "duplicate_check", "insert", "commit")) + " |")
    lines += ["", "Machine load per phase (load average at the start; CPU busy over the phase, all processes "
              "/ this Python process only):", "",
              "| phase | rows | seconds | load average | machine busy % | this process % |", "|---|---|---|---|---|---|"]
    lines += [f"| {p['phase']} | {p['rows']:,} | {p['seconds']} | {p['loadavg_start']} | {p['machine_busy_pct']} "
              f"| {p['this_process_pct']} |" for p in r["phases"]]
    last = r["sizes"][-1]
    met = lambda v, t: "met" if v <= t else "NOT met"  # noqa: E731
    lines += ["", f"Targets at {last['rows']:,} rows: search p95 {last['search']['end_to_end']['p95']:.1f} ms "
              f"(target {TARGET_SEARCH_P95_MS:g}: {met(last['search']['end_to_end']['p95'], TARGET_SEARCH_P95_MS)}), "
              f"save p95 {last['saves']['save']['p95']:.1f} ms "
              f"(target {TARGET_SAVE_P95_MS:g}: {met(last['saves']['save']['p95'], TARGET_SAVE_P95_MS)})."]
    if "index_study" in r:
        ix = r["index_study"]
        lines += ["", f"Index study on {ix['rows_total']:,} rows (median visible rows per caller: "
                  f"{ix['visible_rows']['per_user_median']:.0f} for ordinary users, "
                  f"{ix['visible_rows']['big_project_median']:.0f} in the big project). HNSW build "
                  f"{ix['hnsw_build_s']:.0f} s, {ix['hnsw_size']}; partial HNSW on the big project {ix['partial_build_s']:.0f} s; "
                  f"hnsw.max_scan_tuples={ix['hnsw_max_scan_tuples']}. Recall counts a row at the k-th exact "
                  "distance as found.",
                  "", "| case | k | variant | uses HNSW | p50 ms | p95 ms | recall | queries with < k rows | mean rows |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for t in ix["topk"]:
            lines.append(f"| {t['case']} | {t['k']} | {t['variant']} | {'yes' if t['plan_uses_hnsw'] else 'no'} "
                         f"| {t['p50']:.2f} | {t['p95']:.2f} | {t['recall']:.3f} | {t['queries_short']} "
                         f"| {t['mean_rows']:.1f} |")
        bs = ix["big_project_search"]
        lines += ["", f"Real search (DB only) for big-project callers: p50 / p95 / p99 {fmt(bs['db_only'])} ms; "
                  f"search SQL p95 {bs['breakdown_parts']['candidates']['p95']:.2f} ms.  ",
                  f"Save p50 / p95 / p99 without HNSW {fmt(ix['saves_without_hnsw'])} ms, with HNSW "
                  f"{fmt(ix['saves_with_hnsw'])} ms. The search SQL uses the HNSW index: "
                  f"{'yes' if ix['search_plan_uses_hnsw'] else 'no'}."]
    return "\n".join(lines)


def code_version() -> str:
    """The commit measured, with ``+dirty`` when agent_memory/ has uncommitted changes (read-only git calls)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "agent_memory"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine_info(pool: ConnectionPool) -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    with pool.connection() as conn:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return {"nproc": os.cpu_count(), "cpu": cpu, "python": f"Python {platform.python_version()}",
                "postgres": one("SELECT version()").split(" on ")[0],
                "pgvector": one("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
                "shared_buffers": one("SHOW shared_buffers"), "jit": one("SHOW jit")}


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="row counts to measure at, loaded incrementally")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--queries", type=int, default=300, help="timed searches per size (each in every mode)")
    p.add_argument("--saves", type=int, default=300, help="timed saves per size (plus 100 statement-timed)")
    p.add_argument("--pool", type=int, default=5000, help="distinct stored sentences, embedded once")
    p.add_argument("--jitter", type=float, default=0.3, help="noise norm added to each stored cached vector")
    p.add_argument("--load-chunk", type=int, default=10, help="rows per import call (callers take turns)")
    p.add_argument("--big-project", type=int, default=20000, help="rows of the one big project (--index-study)")
    p.add_argument("--dsn", help="an empty database to use instead of a temporary embedded server")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--index-study", action="store_true", help="exact scan versus HNSW at the largest size")
    p.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of a search at each size")
    p.add_argument("--keep", action="store_true", help="leave the temporary server and its data running, to inspect")
    args = p.parse_args(argv)
    args.sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if not args.sizes or args.sizes[0] < 1 or args.users < USERS_PER_PROJECT:
        p.error("--sizes needs positive numbers and --users at least 5")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    report: dict[str, Any] = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "code": code_version(),
                              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                              "loadavg_before": loadavg(), "phases": []}
    tmp = server = None
    config = MemoryConfig()
    if args.dsn:
        dsn = args.dsn
        with psycopg.connect(dsn) as conn:
            if conn.execute("SELECT to_regclass('memory_items') IS NOT NULL").fetchone()[0]:
                n = conn.execute("SELECT count(*) FROM memory_items").fetchone()[0]
                if n:
                    raise SystemExit(f"memory_items in --dsn already holds {n} rows; point --dsn at an empty "
                                     "database made for the benchmark")
    else:
        from agent_memory.db.embedded import ensure_embedded_server
        from agent_memory.service import DEFAULT_DATABASE

        tmp = Path(tempfile.mkdtemp(prefix="agent-memory-latency-"))
        config = MemoryConfig(data_dir=tmp / "pgdata")
        server = ensure_embedded_server(config.resolved_data_dir(), keep_running=args.keep)
        dsn = server.ensure_database(DEFAULT_DATABASE)
        log(f"embedded PostgreSQL started in {config.data_dir}")
    pool = open_pool(dsn, min_size=1, max_size=4)
    try:
        MemoryService(pool, config=config, embeddings=LocalEmbeddings())  # migrates the schema
        report["machine"] = machine_info(pool)
        log(f"machine: {report['machine']}; load average {report['loadavg_before']}")
        log(f"command: {report['command']}")
        maker = SentenceMaker(SEED)
        n_pool = {s: max(50, int(args.pool * share)) for s, share in
                  (("user", 0.6), ("project", 0.3), ("session", 0.1))}
        pools = {scope: maker.memories(scope, n) for scope, n in n_pool.items()}
        local = LocalEmbeddings()
        t = time.perf_counter()
        texts = [c for pool_ in pools.values() for c, _ in pool_]
        vectors = dict(zip(texts, local.embed_documents_array(texts)))
        report["pool_embed_s"] = time.perf_counter() - t
        log(f"embedded the pool of {len(texts)} distinct sentences in {report['pool_embed_s']:.0f} s "
            f"({len(texts) / report['pool_embed_s']:.0f} texts/s)")
        max_q = args.queries + 30
        qtexts = maker.questions(max(max_q, 220))
        qvecs = {q: local.embed_query(q) for q in qtexts}
        loader_embeddings = CachedEmbeddings(vectors, jitter=args.jitter)
        loader = MemoryService(pool, config=config, embeddings=loader_embeddings)
        bench = Bench(pool, config, local, MemoryService(pool, config=config, embeddings=local),
                      MemoryService(pool, config=config, embeddings=CachedEmbeddings({}, qvecs)),
                      CachedEmbeddings({}, qvecs), qvecs)
        rng = np.random.default_rng(SEED)
        rows = plan_rows(args.sizes[-1], args.users, pools, rng)
        report["data"] = (
            f"{args.users} users with lognormal activity (sigma 0.5), projects of {USERS_PER_PROJECT} users, "
            f"{SESSIONS_PER_USER} sessions per user; scopes {SCOPE_SHARES}. Stored contents come from "
            f"{len(texts)} distinct template sentences embedded once with the local model ({report['pool_embed_s']:.0f} s) "
            "and reused through a caching Embeddings (repeats across tenants, never inside a scope); each stored "
            f"vector gets noise of norm {args.jitter:g} (cosine ~{1 / (1 + args.jitter ** 2) ** 0.5:.2f} to the model's) "
            "so no two rows share a vector. Queries and saved contents are new sentences; end-to-end searches "
            "and saves run the model on every call.")
        report["sizes"] = []
        loaded = 0
        load_rng = random.Random(SEED)
        for size in args.sizes:
            log(f"loading rows {loaded:,} .. {size:,} (import calls of {args.load_chunk} rows, callers interleaved)")
            with Phase(report, "load", size):
                load_stats = load(loader, rows[loaded:size], args.load_chunk, load_rng)
            loaded = size
            with pool.connection() as conn:
                t = time.perf_counter()
                conn.execute("VACUUM ANALYZE memory_items")
                load_stats["vacuum_analyze_s"] = time.perf_counter() - t
                load_stats["table_size"] = conn.execute(
                    "SELECT pg_size_pretty(pg_total_relation_size('memory_items'))").fetchone()[0]
            log(f"  {load_stats}; embedder cache misses so far: {loader_embeddings.misses}")
            prng = random.Random(SEED + size)
            picks = [caller(prng.randrange(args.users), prng.randrange(SESSIONS_PER_USER)) for _ in range(max_q)]
            work = list(zip(picks[30:], qtexts[30:max_q]))
            log(f"  searching: {len(work)} queries x 5 modes (+30 warm-up)")
            with Phase(report, "search", size):
                search = bench.searches(work, list(zip(picks[:30], qtexts[:30])))
            visible = [bench.visible_rows(who) for who, _ in work]
            n_bd = min(100, args.saves)
            log(f"  saving: {args.saves} + {n_bd} statement-timed (+20 warm-up)")
            sw = save_work(maker, args.users, args.saves + n_bd + 20, random.Random(SEED + 2 * size))
            with Phase(report, "save", size):
                saves = bench.saves(sw[20:], sw[:20], n_bd, random.Random(size))
            touch = bench.touch_study(work[:100])
            entry = {"rows": size, "load": load_stats, "search": search, "saves": saves, "touch": touch,
                     "visible_rows": {"median": float(np.median(visible)), "p95": float(np.percentile(visible, 95)),
                                      "max": int(max(visible))},
                     "explain": bench.explain(*work[0])}
            report["sizes"].append(entry)
            log(f"  search end-to-end {fmt(search['end_to_end'])} | DB-only {fmt(search['db_only'])} | "
                f"no UPDATE {fmt(search['db_only_no_touch'])} ms (p50|p95|p99); save {fmt(saves['save'])}; "
                f"visible rows {entry['visible_rows']}")
            if args.explain:
                for name, plan in entry["explain"].items():
                    print(f"--- EXPLAIN {name} at {size:,} rows\n{plan}")
        if args.index_study:
            log("index study")
            prng = random.Random(SEED + 99)
            work_users = [(caller(prng.randrange(args.users), prng.randrange(SESSIONS_PER_USER)), q)
                          for q in qtexts[:100]]
            with Phase(report, "index_study", loaded):
                report["index_study"] = index_study(bench, maker, vectors, args.users, work_users,
                                                    args.big_project, log)
        report["loadavg_after"] = loadavg()
        report["total_s"] = time.perf_counter() - started
        print()
        print(markdown(report))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        return report
    finally:
        if args.dsn:
            with pool.connection() as conn:
                for index in (HNSW_INDEX, PARTIAL_INDEX):
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
                conn.execute("DELETE FROM memory_items WHERE user_id LIKE 'bench-%'")
        pool.close()
        if server is not None and args.keep:
            print(f"\nkept: {server.dsn(DEFAULT_DATABASE)}\nstop it with: python -c \"from agent_memory.db.embedded "
                  f"import stop_embedded_server; stop_embedded_server('{server.data_dir}')\"; rm -rf {tmp}")
        elif server is not None:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
