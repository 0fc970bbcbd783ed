"""What every command needs: the service on the chosen database, the caller's identity, and
memory ids from what people type (an unambiguous prefix of one of the caller's memories)."""

from __future__ import annotations

import argparse
import re
from typing import Any
from uuid import UUID

__all__ = ["config", "enter_resident", "identity", "kept_service", "open_service", "resolve_id"]

_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,35}")
_SHOWN = 6


def config(args: argparse.Namespace) -> Any:
    """The configuration from the environment, with --database-url and --data-dir on top."""
    from ..config import MemoryConfig

    overrides: dict[str, Any] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = args.data_dir
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    return MemoryConfig.from_env(**overrides)


#: in the resident command process (:mod:`.resident`): the services it keeps open, per configuration
_kept: dict[str, Any] | None = None


def enter_resident() -> None:
    """This process is the resident: services stay open between commands (:func:`kept_service`)."""
    global _kept
    _kept = {}


def kept_service(cfg: Any) -> Any:
    """The resident's open service for ``cfg`` (None: the environment's), opened on first use."""
    from ..service import MemoryService
    from .server import keep_server

    assert _kept is not None, "only the resident keeps services"
    if cfg is None:
        from ..config import MemoryConfig

        cfg = MemoryConfig.from_env()
    key = repr(cfg)
    service = _kept.get(key)
    if service is None:
        kept = keep_server(cfg)
        if kept is not None:  # the resident holds connections, not a claim on the server: whether
            # it is idle is the watchdog's to judge from the commands (their mark_used)
            from ..db.embedded import ensure_embedded_server

            ensure_embedded_server(cfg.resolved_data_dir(), keep_running=True).release()
        service = _kept[key] = MemoryService(kept or cfg.database_url, config=cfg)
    return service


class _Borrowed:
    """A kept service as ``with open_service(args) as memory`` uses it: not closed at the end."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def __enter__(self) -> Any:
        return self.service

    def __exit__(self, *exc: object) -> None:
        from ..db.watchdog import mark_used

        if not self.service.config.database_url:
            mark_used(self.service.config.resolved_data_dir())


def open_service(args: argparse.Namespace) -> Any:
    """A :class:`MemoryService` on the chosen database (use it as a context manager)."""
    from ..service import MemoryService
    from .server import keep_server

    cfg = config(args)
    if _kept is not None:
        return _Borrowed(kept_service(cfg))
    kept = keep_server(cfg)  # the embedded server outlives this command (until MEMORY_SERVER_IDLE_TIMEOUT)
    return MemoryService(kept or cfg.database_url, config=cfg)


def identity(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_id": args.user, "project_id": getattr(args, "project", None),
            "session_id": getattr(args, "session", None), "team_id": getattr(args, "team", None),
            "org_id": getattr(args, "org", None)}


def _ids_with_prefix(who: Any, prefix: str) -> Any:
    """Op: ids of the memories ``who`` may see (any status) that start with ``prefix``; at most a
    few, in id order. The same visibility rule as every read."""
    from ..db.requests import Sql
    from ..queries import ids_with_prefix, item_filter

    rows = yield Sql(*ids_with_prefix(item_filter(who, statuses=None), prefix, _SHOWN))
    return [r["id"] for r in rows]


def resolve_id(memory: Any, me: Any, text: str) -> Any:
    """The memory id ``text`` stands for, for the handle ``me``: a whole id as is, or the one memory
    visible to them whose id starts with it. Anything else goes to the service as typed, which
    says what is wrong with it."""
    from ..errors import InvalidInputError, MemoryNotFoundError

    prefix = text.strip().lower()
    if not _PREFIX.fullmatch(prefix) or len(prefix) == 36:
        return text
    try:
        return UUID(prefix)
    except ValueError:
        pass
    found = memory.execute(_ids_with_prefix(me.identity, prefix))
    if not found:
        raise MemoryNotFoundError(f"no memory visible to user {me.identity.user_id!r} has an id starting with "
                                  f"{prefix!r}; list or search memories to find valid ids")
    if len(found) > 1:
        shown = ", ".join(str(i)[: len(prefix) + 4] for i in found[: _SHOWN - 1])
        more = " and more" if len(found) >= _SHOWN else ""
        raise InvalidInputError("memory_id", f"{prefix!r} starts the ids of several memories ({shown}{more}); "
                                             "give more characters")
    return found[0]
