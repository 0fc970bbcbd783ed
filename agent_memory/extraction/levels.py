"""Where an extracted statement about a group is kept: at the level it was said of.

"We deploy on Fridays" is the project's, "our team squash-merges" the team's, "our org
requires SSO" the organisation's: such a proposal is written at that level when the run has
one and the caller may write there. Otherwise the nearest level the run has and the caller may
write takes it (a team's habit holds for the project it works on; an organisation's rule for
its teams and projects). When none does, it is kept as the user's own memory, *flagged*:
``said_of`` in its metadata names the level it was about, the run report's outcome says so,
and the user profile leaves it out (it is not the user's own background).
"""

from __future__ import annotations

import dataclasses
from .. import access
from ..config import MemoryConfig
from ..db.requests import Op
from ..errors import PermissionDeniedError
from ..models import SHARED_SCOPES, Identity, Proposal, Scope

__all__ = ["NEAREST", "Placement", "SAID_OF", "place"]

#: the levels tried, in order, for a statement said of each shared level
NEAREST: dict[Scope, tuple[Scope, ...]] = {
    Scope.PROJECT: (Scope.PROJECT,),
    Scope.TEAM: (Scope.TEAM, Scope.PROJECT),
    Scope.ORG: (Scope.ORG, Scope.TEAM, Scope.PROJECT),
}

#: the metadata key of a memory kept as a user memory though it was said of a group
SAID_OF = "said_of"


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """A proposal as placed: ``proposal.scope`` is where it goes; ``said_of`` the group level it
    was about when that is not where it goes (None when it went there); ``note`` the reason,
    for the run report."""

    proposal: Proposal
    said_of: Scope | None = None
    note: str = ""

    @property
    def flagged(self) -> bool:
        """Kept as the user's own memory though it was said of a group."""
        return self.said_of is not None and self.proposal.scope is Scope.USER


def _may_write(config: MemoryConfig, identity: Identity, level: Scope,
               known: dict[Scope, str | None]) -> Op[str | None]:
    """None when the caller may write ``level``, else why not (remembered in ``known``)."""
    if level not in known:
        if identity.scope_id(level) is None:
            known[level] = f"this run has no {level.value}"
        else:
            try:
                yield from access.require_write(config, identity, level, "saving an extracted memory")
                known[level] = None
            except PermissionDeniedError as exc:
                known[level] = str(exc)
    return known[level]


def place(config: MemoryConfig, identity: Identity, proposal: Proposal,
          known: dict[Scope, str | None] | None = None) -> Op[Placement]:
    """Where ``proposal`` goes: its own level, the nearest the run has and the caller may write
    (:data:`NEAREST`), or the user's, flagged. ``known`` keeps the answers of one run, so each
    level's rights are read once."""
    if proposal.scope not in SHARED_SCOPES:
        return Placement(proposal)
    known = {} if known is None else known
    why: list[str] = []
    for level in NEAREST[proposal.scope]:
        refused = yield from _may_write(config, identity, level, known)
        if refused is None:
            if level is proposal.scope:
                return Placement(proposal)
            return Placement(dataclasses.replace(proposal, scope=level), proposal.scope,
                             f"said of the {proposal.scope.value}, kept at the {level.value} level "
                             f"({'; '.join(why)}); ")
        why.append(refused)
    return Placement(dataclasses.replace(proposal, scope=Scope.USER), proposal.scope,
                     f"said of the {proposal.scope.value} but kept as a user memory, flagged "
                     f"({'; '.join(why)}); ")
