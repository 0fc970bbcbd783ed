"""When an extraction run is worth one of the session's runs, and the turns that wait for it.

The specification's rate limit stays (``max_extractions`` runs per session in
``extraction_window_hours``), and each run counts: it reads every turn not read yet, the ones
that waited included, so a long thread is read whole within the budget. Pure functions:

- a turn the cadence defers is *stashed*: kept on the session's conversation (secrets withheld)
  and the cursor moved past it, so it is never lost, whatever happens to the agent's process or
  thread; the next run reads it first;
- :func:`due` says whether a run happens now: once ``every`` user turns wait (the agent
  middleware's cadence; a direct ``extract()`` call asks for one), and, when the caller keeps the
  last run (the middleware does), not with the last run of the window, which is kept for the end
  of the conversation: after it goes idle, when the thread is resumed, or when the user's next
  session starts (:func:`agent_memory.extraction.pipeline.extract_waiting`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from ..withheld import redact
from .transcript import Turn

__all__ = ["WITHHELD", "due", "turns_from_json", "turns_to_json", "user_turns", "waiting_turns"]

#: what a secret in a waiting turn became (:func:`agent_memory.withheld.redact`); a proposal that
#: quotes one is not a memory
WITHHELD = "[withheld"

Due = Literal["now", "wait", "keep_last_run"]


def user_turns(turns: Sequence[Turn]) -> int:
    """How many of ``turns`` are the user's, with words in them."""
    return sum(1 for t in turns if t.role == "user" and t.text.strip())


def due(new_user_turns: int, *, every: int, runs_left: int | None, keep_last_run: bool) -> Due:
    """Whether a run is due: ``"now"``; ``"wait"`` (fewer than ``every`` user turns wait);
    ``"keep_last_run"`` (the window's last run is kept for the end of the conversation).
    ``runs_left`` None: not asked (the run will count it under the session's lock)."""
    if new_user_turns < every or new_user_turns == 0:
        return "wait"
    if keep_last_run and runs_left == 1:
        return "keep_last_run"
    return "now"


def turns_to_json(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """``turns`` as JSON to keep on the conversation, each secret replaced by ``[withheld: <kind>]``."""
    return [{"id": t.id, "role": t.role, "text": redact(t.text), "at": None if t.at is None else t.at.isoformat()}
            for t in turns if t.text.strip()]


def turns_from_json(values: Any) -> list[Turn]:
    """The turns kept by :func:`turns_to_json` (anything else in the list is skipped)."""
    out: list[Turn] = []
    for v in values if isinstance(values, list) else []:
        if not isinstance(v, Mapping) or v.get("role") not in ("user", "assistant") or not isinstance(v.get("text"), str):
            continue
        at = None
        if isinstance(v.get("at"), str):
            try:
                at = datetime.fromisoformat(v["at"])
            except ValueError:
                at = None
        out.append(Turn(v.get("id") if isinstance(v.get("id"), str) else None, v["role"], v["text"], at))
    return out


def waiting_turns(metadata: Mapping[str, Any] | None) -> list[Turn]:
    """The turns waiting on a conversation, from its metadata."""
    return turns_from_json((metadata or {}).get("waiting"))
