"""`Speculator`: n-gram drafts for generating slots, and how long each slot's drafts may be.

Each step, a generating slot may carry a draft after its next token: tokens guessed from what
came before, verified in the same llama_decode as every other slot's tokens (app/engine/
stepper.py keeps the samples that equal the draft and rolls the KV back past the first that
does not). Drafting changes no output: every token is still sampled from the model's logits at
its position, with the sampler's state advanced token by token as without speculation.

Sources, in order: the request's own context (its prompt, with the documents and the
conversation, and the reply so far; llama-server's `ngram-simple`), then, with `ngram-docs`,
the replies given earlier on the same documents (`ReplyMemory`).

Draft length adapts per slot (per request on it): it doubles after a fully accepted draft and
falls to one past the accepted run after a miss; a slot whose drafts are mostly rejected stops
drafting for a while (a rejected token costs compute and gains nothing). The drafts of one step
share one budget (`n_max`), so a full batch gets few extra tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.draft_state import DraftState
from app.engine.ngram_index import NgramIndex
from app.engine.reply_memory import ReplyMemory

if TYPE_CHECKING:
    from app.engine.task import Task

SPEC_TYPES = ("none", "ngram-simple", "ngram-docs")
LOW_ACCEPTANCE = 0.25  # below this share of accepted draft tokens, a slot pauses drafting
MAX_PAUSE = 64  # steps


class Speculator:
    def __init__(
        self,
        spec_type: str,
        ngram_size: int,
        n_max: int,
        n_min: int,
        replies: ReplyMemory | None,
    ) -> None:
        if spec_type not in SPEC_TYPES:
            raise ValueError(f"unknown speculative decoding type {spec_type!r}")
        self.spec_type = spec_type
        self.ngram_size = ngram_size
        self.n_max = n_max  # draft tokens one step may carry, all slots together
        self.n_min = n_min  # a shorter draft is not worth verifying
        self.replies = replies if spec_type == "ngram-docs" else None

    @property
    def enabled(self) -> bool:
        return self.spec_type != "none" and self.n_max > 0

    def drafts(self, decoding: list[tuple[Task, int]]) -> list[list[int]]:
        """A draft (maybe empty) for each (task, room) about to decode its next token; `room`:
        most draft tokens the task can take (context and max_tokens left)."""
        budget = self.n_max
        out: list[list[int]] = []
        for task, room in decoding:
            draft = self._draft(task, min(room, budget)) if budget > 0 else []
            budget -= len(draft)
            out.append(draft)
        return out

    def _draft(self, task: Task, room: int) -> list[int]:
        state = task.draft_state
        if state is None:
            state = task.draft_state = self._start(task)
        if state.pause > 0:
            state.pause -= 1
            return []
        n = min(room, state.n_draft)
        if n < max(self.n_min, 1):
            return []
        generated = task.generated
        state.context.extend(generated[state.n_synced :])
        state.n_synced = len(generated)
        draft = state.context.propose(n)
        gram = state.context.tail()
        for reply in state.replies if not draft and gram is not None else ():
            draft = reply.follow(gram, n)
            if draft:
                break
        return draft if len(draft) >= max(self.n_min, 1) else []

    def _start(self, task: Task) -> DraftState:
        request = task.request
        context = NgramIndex(self.ngram_size, request.prompt.tokens)
        replies = []
        if self.replies is not None and request.documents:
            replies = self.replies.replies(request.cache_salt, request.documents)
        return DraftState(context, replies)

    def observe(self, task: Task, drafted: int, accepted: int) -> None:
        """A draft was verified: adapt the slot's draft length and maybe pause it."""
        state = task.draft_state
        if state is None or drafted == 0:
            return
        state.acceptance = 0.7 * state.acceptance + 0.3 * (accepted / drafted)
        if accepted == drafted:
            state.n_draft = min(2 * state.n_draft, max(self.n_max, 1))
        else:
            state.n_draft = max(accepted + 1, 2)
        if state.acceptance < LOW_ACCEPTANCE:
            state.pause, state.next_pause = state.next_pause, min(2 * state.next_pause, MAX_PAUSE)
            state.acceptance = LOW_ACCEPTANCE  # one good draft after the pause lifts it
        elif accepted:
            state.next_pause = 4

    def finished(self, task: Task) -> None:
        """A request ended: its reply joins the memory of its documents."""
        if self.replies is not None and task.request.documents and not task.request.background:
            self.replies.add(task.request.cache_salt, task.request.documents, task.generated)

    def forget(self, document_ids: set[str]) -> None:
        if self.replies is not None:
            self.replies.forget(document_ids)

    def reset(self) -> None:
        if self.replies is not None:
            self.replies.clear()
