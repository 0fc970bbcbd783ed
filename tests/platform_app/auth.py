"""Bearer-token auth for the platform test app: two users, each with a token of their own."""

from langgraph_sdk import Auth

auth = Auth()

USERS = {
    "token-alice": {"identity": "alice", "project_id": "apollo"},
    "token-bob": {"identity": "bob"},
}


@auth.authenticate
async def authenticate(authorization: str | None) -> dict[str, str]:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or token not in USERS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown bearer token")
    return USERS[token]


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict[str, str]:
    """Threads, runs and assistants a user creates are theirs alone (the platform's own data)."""
    metadata = value.setdefault("metadata", {}) if isinstance(value, dict) else {}
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.store
async def memory_is_scoped_by_agent_memory(ctx: Auth.types.AuthContext, value: dict) -> None:
    """The store is agent-memory's, which acts for ``ctx.user`` itself: no filter to add here."""
    return None
