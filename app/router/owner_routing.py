"""Where a request under a stored session, collection or document goes when it names no model:
to the model that session or collection remembers (the one whose server made it, or, for a
session, the one a PATCH moved it to), so that a conversation's turns, a collection's questions
and uploads reach the server whose tokens and KV they are in.

- It remembers a model the router serves: that model's server (loaded first if it is not).
- It remembers none (made before sessions and collections had one), or the caller's tenant has
  no such thing: the router's default; the model's server answers 404 for what is not there.
- It remembers a model the router no longer serves: a request that runs a model (a turn, a
  regeneration, a question) is refused with a 400 that names that model; any other (reading it,
  deleting it, moving the session with PATCH `model`) goes to the default.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass

from app.db.remembered_models import Kind, RememberedModels
from app.router.model_router import ModelRouter, RouterError

log = logging.getLogger(__name__)

OWNED_PATH = re.compile(r"/v1/(sessions|collections|documents)/([^/]+)(?:/.*)?")
KINDS: dict[str, Kind] = {
    "sessions": "session",
    "collections": "collection",
    "documents": "document",
}


@dataclass(slots=True, frozen=True)
class Owner:
    kind: Kind
    id: str


def owner_of(path: str) -> Owner | None:
    """The session, collection or document a path is under (`/v1/sessions/{id}/messages`)."""
    found = OWNED_PATH.fullmatch(path)
    return Owner(KINDS[found[1]], found[2]) if found else None


class OwnerRouting:
    def __init__(self, remembered: RememberedModels, router: ModelRouter) -> None:
        self.remembered = remembered
        self.router = router

    async def model_for(self, owner: Owner, tenant: str, runs_model: bool) -> str | None:
        """The served model the owner remembers; None: the default's (see the module's
        docstring). RouterError: a model that is not served, for a request that runs one
        (400), or the database did not answer (503)."""
        try:
            found = await asyncio.to_thread(self.remembered.model_of, owner.kind, owner.id, tenant)
        except Exception as e:
            log.exception("could not read the model of %s %s", owner.kind, owner.id)
            raise RouterError("the database did not answer; try again", 503, "unavailable") from e
        if found is None or found.model is None:
            return None
        if found.model in self.router.models:
            return found.model
        if not runs_model:
            return None
        raise RouterError(_not_served(owner, found.model), 400, "model_not_found")


def _not_served(owner: Owner, model: str) -> str:
    whose = "its collection's" if owner.kind == "document" else "its"
    move = " or move the session to one (PATCH its `model`)" if owner.kind == "session" else ""
    return (
        f"{owner.kind} {owner.id!r}: {whose} model {model!r} is not served here; "
        f"name a served model in the request (`model`){move}"
    )
