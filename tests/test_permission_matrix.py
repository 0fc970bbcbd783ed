"""The docs' permission tables are the truth: every cell is played out in the database.

The tables of docs/reference/permissions.md are parsed; for each cell a fresh
project, team or org is set up with a user in that column's position, who then tries that
row's action. A ✓ must succeed and a ✗ must be refused (``PermissionDeniedError``) or, for
reading, leave the memory invisible (``MemoryNotFoundError``, absent from lists and search).
The rows and columns must be exactly the ones this file knows how to play, and the
role columns must also agree with :data:`agent_memory.access.MATRIX`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_memory import (
    MemoryItem,
    MemoryNotFoundError,
    MemoryService,
    PermissionDeniedError,
    Scope,
)
from agent_memory.access import Action, allowed_roles
from agent_memory.models import Role

PERMISSIONS = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "permissions.md").read_text(encoding="utf-8")
_FOOTNOTES = str.maketrans("", "", "¹²³⁴⁵⁶⁷⁸⁹⁰*`")
_MARKS = {"✓": True, "✗": False}

Table = tuple[list[str], dict[str, dict[str, bool]]]  # columns, row -> column -> allowed


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _clean(text: str) -> str:
    return " ".join(text.translate(_FOOTNOTES).split())


def parse_tables(page: str) -> dict[str, Table]:
    """The project, team and org tables of the permission matrix page, by their first header cell."""
    tables: dict[str, Table] = {}
    lines = page.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].startswith("|"):
            block.append(lines[i])
            i += 1
        kind, *columns = (_clean(c) for c in _cells(block[0]))
        assert kind not in tables, f"two {kind!r} tables"
        rows: dict[str, dict[str, bool]] = {}
        for line in block[2:]:
            label, *marks = _cells(line)
            assert len(marks) == len(columns), f"{kind} table, row {label!r}: {len(marks)} cells"
            assert _clean(label) not in rows, f"{kind} table: row {label!r} twice"
            rows[_clean(label)] = {c: _MARKS[_clean(m)] for c, m in zip(columns, marks)}
        tables[kind] = (columns, rows)
    return tables


TABLES = parse_tables(PERMISSIONS)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- the situations: one scope, its founder, a second writer, and the user of the column ------

#: the role each column's user ends up with (None: not a member)
COLUMN_ROLES: dict[str, dict[str, Role | None]] = {
    "project": {"owner": Role.OWNER, "admin": Role.ADMIN, "editor": Role.EDITOR, "viewer": Role.VIEWER,
                "shared with": None, "outsider": None},
    "team": {"lead": Role.LEAD, "member (write: members)": Role.MEMBER, "member (write: leads)": Role.MEMBER,
             "outsider": None},
    "org": {"admin": Role.ADMIN, "member": Role.MEMBER, "outsider": None},
}
#: the founder's role, and the role that lets a user write in each kind of scope
FOUNDER = {"project": Role.OWNER, "team": Role.LEAD, "org": Role.ADMIN}
WRITER = {"project": Role.EDITOR, "team": Role.MEMBER, "org": Role.ADMIN}
LOWEST = {"project": Role.VIEWER, "team": Role.MEMBER, "org": Role.MEMBER}


@dataclass
class World:
    memory: MemoryService
    kind: str
    column: str
    scope_id: str = field(init=False)
    founder: str = field(init=False)
    writer: str = field(init=False)
    actor: str = field(init=False)

    def __post_init__(self) -> None:
        self.scope_id, self.founder, self.writer = fresh(self.kind), fresh("founder"), fresh("writer")
        getattr(self.memory, f"create_{self.kind}")(self.scope_id, user_id=self.founder)
        self.memory.add_member(self.kind, self.scope_id, self.writer, WRITER[self.kind].value, user_id=self.founder)
        self.actor = self.founder if COLUMN_ROLES[self.kind][self.column] is FOUNDER[self.kind] else fresh("actor")

    def ids(self, user: str) -> dict[str, str]:
        return {"user_id": user, f"{self.kind}_id": self.scope_id}

    def save(self, user: str, content: str, visibility: str = "members") -> MemoryItem:
        item = self.memory.for_user(**self.ids(user)).add(content, scope=self.kind, visibility=visibility)
        assert isinstance(item, MemoryItem), item
        return item

    def let_actor_write(self) -> None:
        """Give the column's user a role that writes, for what they should have written before."""
        if self.actor != self.founder:
            self.memory.add_member(self.kind, self.scope_id, self.actor, WRITER[self.kind].value,
                                   user_id=self.founder)

    def settle(self) -> None:
        """Put the column's user (and the team's policy) where the column says."""
        if self.actor == self.founder:
            return
        role = COLUMN_ROLES[self.kind][self.column]
        if role is None:
            self.memory.remove_member(self.kind, self.scope_id, self.actor, user_id=self.founder)
        else:
            self.memory.add_member(self.kind, self.scope_id, self.actor, role.value, user_id=self.founder)
        if self.column == "shared with":
            self.memory.share_project(self.scope_id, with_user=self.actor, user_id=self.founder)
        if self.column == "member (write: leads)":
            self.memory.set_team_write(self.scope_id, "leads", user_id=self.founder)


def allowed(*attempts: Callable[[], object]) -> bool:
    """Run the attempts; all must succeed or all be refused (refused: not allowed, or not visible)."""
    outcomes = []
    for attempt in attempts:
        try:
            attempt()
            outcomes.append(True)
        except (PermissionDeniedError, MemoryNotFoundError):
            outcomes.append(False)
    assert len(set(outcomes)) == 1, f"the attempts disagree: {outcomes}"
    return outcomes[0]


# --- the actions: one per row ------------------------------------------------------------------


def read(visibility: str) -> Callable[[World], bool]:
    def check(w: World) -> bool:
        item = w.save(w.writer, f"The {w.kind} keeps its {visibility} notes in the wiki", visibility)
        w.settle()
        me = w.ids(w.actor)
        listed = item.id in {i.id for i in w.memory.for_user(**me).list(scope=w.kind)}
        found = item.id in {r.id for r in w.memory.for_user(**me).search(item.content, scope=w.kind, k=50)}
        got = allowed(lambda: w.memory.for_user(**me).get(item.id))
        assert listed == found == got, (listed, found, got)
        return got

    return check


def create(w: World) -> bool:
    w.settle()
    content = f"The {w.kind} deploys from the main branch only"
    ok = allowed(lambda: w.save(w.actor, content))
    stored = [i for i in w.memory.for_user(**w.ids(w.founder)).list(scope=w.kind) if i.content == content]
    assert [i.user_id for i in stored] == ([w.actor] if ok else [])
    return ok


def edit_delete_restore(own: bool) -> Callable[[World], bool]:
    def check(w: World) -> bool:
        if own:
            w.let_actor_write()
        author = w.actor if own else w.writer
        # public, so that a user the project is shared with can see it
        item = w.save(author, f"The {w.kind} reviews every change before merging", "public")
        w.settle()
        me = w.ids(w.actor)

        def archive_then_restore() -> None:
            if w.memory.for_user(**w.ids(w.founder)).get(item.id).status.value != "archived":
                w.memory.for_user(**w.ids(w.founder)).delete(item.id)
            assert w.memory.for_user(**me).restore(item.id).status.value == "active"

        return allowed(
            lambda: w.memory.for_user(**me).edit(item.id, content=f"The {w.kind} reviews every change twice"),
            lambda: w.memory.for_user(**me).delete(item.id),
            archive_then_restore,
        )

    return check


def manage_members(w: World) -> bool:
    w.settle()
    newcomer, role = fresh("newcomer"), LOWEST[w.kind].value

    def remove() -> None:
        w.memory.add_member(w.kind, w.scope_id, newcomer, role, user_id=w.founder)
        assert w.memory.remove_member(w.kind, w.scope_id, newcomer, user_id=w.actor) is True

    return allowed(lambda: w.memory.add_member(w.kind, w.scope_id, newcomer, role, user_id=w.actor), remove)


def edit_project_profile(w: World) -> bool:
    w.settle()
    me = w.ids(w.actor)
    return allowed(
        lambda: w.memory.for_user(**me).update_profile({"current_phase": "Beta in May"}, kind="project"),
        lambda: w.memory.for_user(**me).reset_profile_fields(["current_phase"], kind="project"),
    )


def share_project(w: World) -> bool:
    w.settle()
    grantee = fresh("grantee")

    def unshare() -> None:
        w.memory.share_project(w.scope_id, with_user=grantee, user_id=w.founder)
        assert w.memory.unshare_project(w.scope_id, with_user=grantee, user_id=w.actor) is True

    return allowed(lambda: w.memory.share_project(w.scope_id, with_user=grantee, user_id=w.actor), unshare)


def change_write_policy(w: World) -> bool:
    w.settle()
    return allowed(lambda: w.memory.set_team_write(w.scope_id, "leads", user_id=w.actor),
                   lambda: w.memory.set_team_write(w.scope_id, "members", user_id=w.actor))


def delete_scope(w: World) -> bool:
    w.save(w.writer, f"The {w.kind} has a memory to lose")
    w.settle()
    ok = allowed(lambda: w.memory.delete_scope(w.kind, w.scope_id, user_id=w.actor))
    gone = not allowed(lambda: w.memory.list_members(w.kind, w.scope_id, user_id=w.founder))
    assert gone == ok
    return ok


_SHARED_ROWS: dict[str, Callable[[World], bool]] = {
    "read others' owner_only memories": read("owner_only"),
    "create memories": create,
    "edit / delete / restore own memories": edit_delete_restore(own=True),
    "edit / delete / restore others' memories": edit_delete_restore(own=False),
    "manage members": manage_members,
}
ROWS: dict[str, dict[str, Callable[[World], bool]]] = {
    "project": {
        "read public memories": read("public"),
        "read members memories": read("members"),
        **_SHARED_ROWS,
        "hand-edit the project profile": edit_project_profile,
        "share / unshare the project": share_project,
        "delete the project": delete_scope,
    },
    "team": {
        "read the team's memories": read("members"),
        **_SHARED_ROWS,
        "change the write policy": change_write_policy,
        "delete the team": delete_scope,
    },
    "org": {
        "read the org's memories": read("members"),
        **_SHARED_ROWS,
        "delete the org": delete_scope,
    },
}

#: the rows that are one action of access.MATRIX (the others depend on visibility)
ACTIONS = {
    "read members memories": Action.READ, "read the team's memories": Action.READ,
    "read the org's memories": Action.READ, "create memories": Action.CREATE,
    "edit / delete / restore own memories": Action.EDIT_OWN,
    "edit / delete / restore others' memories": Action.EDIT_ANY, "manage members": Action.MANAGE_MEMBERS,
    "hand-edit the project profile": Action.EDIT_PROFILE, "share / unshare the project": Action.SHARE,
    "change the write policy": Action.MANAGE_MEMBERS, "delete the project": Action.DELETE_SCOPE,
    "delete the team": Action.DELETE_SCOPE, "delete the org": Action.DELETE_SCOPE,
}


def test_the_readme_tables_have_exactly_the_rows_and_columns_checked_here() -> None:
    assert set(TABLES) == set(ROWS)
    for kind, (columns, rows) in TABLES.items():
        assert columns == list(COLUMN_ROLES[kind]), kind
        assert set(rows) == set(ROWS[kind]), kind


def test_the_readme_tables_agree_with_the_matrix_in_the_code() -> None:
    for kind, (_, rows) in TABLES.items():
        for row, cells in rows.items():
            if row not in ACTIONS:
                continue
            for column, expected in cells.items():
                policy = "leads" if column == "member (write: leads)" else "members"
                roles = allowed_roles(Scope(kind), ACTIONS[row], team_write=policy)
                assert (COLUMN_ROLES[kind][column] in roles) == expected, (kind, row, column)


CELLS = [
    pytest.param(kind, row, column, expected, id=f"{kind}: {row} / {column}")
    for kind, (_, rows) in TABLES.items() for row, cells in rows.items() for column, expected in cells.items()
]


@pytest.mark.parametrize(("kind", "row", "column", "expected"), CELLS)
def test_every_cell_of_the_readme_tables_holds(memory: MemoryService, kind: str, row: str, column: str,
                                               expected: bool) -> None:
    if row not in ROWS.get(kind, {}):
        pytest.fail(f"no check for the {kind} row {row!r}")  # also caught by the test above
    world = World(memory, kind, column)
    assert ROWS[kind][row](world) is expected, f"docs/reference/permissions.md says {'✓' if expected else '✗'}"
