"""Static bearer tokens for the MCP server's HTTP transport, each mapped to one principal.

The token file is JSON: ``{"<sha256 hex of a token>": {"user_id": "alice", "project_id": "webshop",
"team_id": null, "org_id": null}, ...}`` (a key may also be written ``"sha256:<hex>"``). Only
hashes are stored; make one with ``agent-memory mcp hash-token``. A presented
token is hashed and compared with every stored hash in constant time (:func:`hmac.compare_digest`),
so neither a match nor a miss is told apart by timing. The verifier is the SDK's
:class:`~mcp.server.auth.provider.TokenVerifier`: the SDK's bearer middleware answers 401 to a
request without a valid token, and the principal travels in the access token's claims.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import AccessToken

from agent_memory.errors import ConfigurationError, InvalidInputError
from agent_memory.models import Identity
from agent_memory.validation import check_identity

__all__ = ["TOKEN_FIELDS", "StaticTokenVerifier", "hash_token", "identity_of", "load_tokens"]

#: what a token file may say about a token's principal (a session is per conversation, not per token)
TOKEN_FIELDS = ("user_id", "project_id", "team_id", "org_id")

_PREFIX = "sha256:"


def hash_token(token: str) -> str:
    """The hex sha256 of ``token``: what the token file stores instead of the token.

    A token is printable ASCII without spaces. HTTP carries a header as bytes that servers
    decode as Latin-1, so a token with other characters arrived as another string than the one
    hashed here and could never authenticate; it is refused here, where it is made. RFC 6750's
    bearer tokens are narrower still; ``secrets.token_urlsafe()`` makes good ones.
    """
    if not isinstance(token, str) or not token.strip():
        raise InvalidInputError("token", "must be a non-empty string")
    if not all("!" <= c <= "~" for c in token):
        raise InvalidInputError(
            "token", "may hold only printable ASCII without spaces (letters, digits, - . _ ~ + / =), which is "
                     "all an HTTP header carries intact; make one with: "
                     "python3 -c \"import secrets; print(secrets.token_urlsafe(32))\"")
    return _digest(token)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _parse_hash(key: Any) -> str:
    digest = key[len(_PREFIX):] if isinstance(key, str) and key.startswith(_PREFIX) else key
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
        raise ConfigurationError(
            f"token file: {str(key)[:20]!r}... is not a sha256 hash (64 hex digits); store hashes, not "
            "tokens: agent-memory mcp hash-token"
        )
    return digest.lower()


def parse_tokens(data: Any) -> dict[str, Identity]:
    """A token file's JSON, checked: sha256 hex -> the principal it stands for."""
    if not isinstance(data, Mapping) or not data:
        raise ConfigurationError("token file: expected a JSON object of token hash -> {\"user_id\": ...}")
    tokens: dict[str, Identity] = {}
    for key, principal in data.items():
        digest = _parse_hash(key)
        if not isinstance(principal, Mapping):
            raise ConfigurationError(f"token file: the entry of {digest[:8]}... must be an object with user_id")
        unknown = set(principal) - set(TOKEN_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"token file: the entry of {digest[:8]}... has unknown keys {sorted(unknown)}; "
                f"allowed: {', '.join(TOKEN_FIELDS)}")
        try:
            tokens[digest] = check_identity(
                principal.get("user_id"), principal.get("project_id"), None, principal.get("team_id"),
                principal.get("org_id"))
        except InvalidInputError as exc:
            raise ConfigurationError(f"token file: the entry of {digest[:8]}...: {exc}") from exc
    return tokens


def load_tokens(path: str | Path) -> dict[str, Identity]:
    """Read and check a token file (:func:`parse_tokens`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"token file {path} is not valid JSON: {exc}") from exc
    return parse_tokens(data)


def identity_of(token: AccessToken | None) -> Identity | None:
    """The principal a verified access token stands for (``None`` without one)."""
    if token is None or not token.claims or not isinstance(token.claims.get("identity"), Mapping):
        return None
    return Identity(**token.claims["identity"])


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` over a fixed table of token hashes."""

    def __init__(self, tokens: Mapping[str, Identity]) -> None:
        if not tokens:
            raise ConfigurationError("no tokens: the HTTP transport needs at least one (--tokens FILE)")
        self._tokens = [(digest.encode("ascii"), identity) for digest, identity in tokens.items()]

    def lookup(self, token: str) -> Identity | None:
        """The principal of ``token``, comparing its hash with every stored one in constant time."""
        presented = _digest(token).encode("ascii")
        found: Identity | None = None
        for digest, identity in self._tokens:  # no early exit: every lookup does the same work
            if hmac.compare_digest(presented, digest):
                found = identity
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        identity = self.lookup(token)
        if identity is None:
            return None
        return AccessToken(
            token=_digest(token), client_id=identity.user_id, subject=identity.user_id, scopes=[],
            claims={"identity": identity.kwargs()},
        )
