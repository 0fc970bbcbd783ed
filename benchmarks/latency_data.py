"""The synthetic workload of ``latency.py``: who the callers are and what they store.

Template sentences drawn into distinct memories and questions, the tenants (users,
their projects and sessions), the planned rows and their interleaved import, the
saves to time, and the caching Embeddings that lets the loader skip the model for
sentences embedded once. Kept apart so the measuring code reads without the vocabulary.
"""

from __future__ import annotations

import random
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_memory import MemoryService
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.validation import check_identity

SEED = 20240611
SCOPE_SHARES = {"user": 0.70, "project": 0.25, "session": 0.05}
USERS_PER_PROJECT = 5
SESSIONS_PER_USER = 2

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
    item: dict[str, Any]  # what add_many takes


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
    """Import ``rows`` through ``MemoryHandle.add_many``.

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
            result = service.for_user(**who.kwargs()).add_many(batch)
            calls += 1
            inserted += len(result.inserted)
            rejected += len(result.rejected)
    seconds = time.perf_counter() - start
    return {"rows": len(rows), "inserted": inserted, "rejected": rejected, "import_calls": calls,
            "seconds": seconds, "rows_per_s": len(rows) / seconds if seconds else 0.0}


def save_work(maker: SentenceMaker, users: int, n: int, rng: random.Random) -> list[tuple[Caller, dict[str, Any]]]:
    work = []
    for _ in range(n):
        scope = rng.choices(list(SCOPE_SHARES), weights=list(SCOPE_SHARES.values()))[0]
        [(content, memory_type)] = maker.memories(scope, 1)
        work.append((caller(rng.randrange(users), rng.randrange(SESSIONS_PER_USER)),
                     {"content": content, "memory_type": memory_type, "scope": scope,
                      "confidence": round(rng.uniform(0.7, 1.0), 2)}))
    return work
