"""`Speculator`: n-gram drafts for generating slots, and how long each slot's drafts may be.

Each step, a generating slot may carry a draft after its next token: tokens guessed from what
came before, verified in the same llama_decode as every other slot's tokens (app/engine/
core/stepper.py keeps the samples that equal the draft and rolls the KV back past the first that
does not). Drafting changes no output: every token is still sampled from the model's logits at
its position, with the sampler's state advanced token by token as without speculation.

Sources: the request's own context (its prompt, with the documents and the conversation, and
the reply so far; llama-server's `ngram-simple`) and, with `ngram-docs`, the replies given
earlier on the same documents (`ReplyMemory`, each after the end of its prompt). The source
whose match agrees longest with the end of the context drafts: a question asked again finds its
earlier answer there, from the answer's first token on (its question agrees), which a 3-token
match in the prompt would otherwise win.

Draft length is chosen per slot (per request on it) from two measured figures: the chance that
a draft token is accepted (a moving estimate per request, `DraftState.acceptance`) and what a
draft token costs in generated tokens' worth (`DraftCost`, from the engine's own decodes). The
i-th token of a draft is accepted with chance p^i and costs the ratio c whether accepted or not,
so a draft is as long as p^i > c + `MARGIN` holds (each token expected to gain a tenth of a
step at least: both figures are estimates), and none where p <= c + `MARGIN`: on a CPU, where a
draft token costs half a step or more, only a request that copies well drafts, and with several
busy slots (a token is worth less of a step) even less, or none. The estimate is kept apart
by the draft's evidence: a match that agrees with the context's end over `LONG_MATCH` tokens (a
passage being quoted, the reply's own loop) is accepted far more often than a 3-token one, so a
request whose short matches stopped paying still drafts its long ones. An estimate that stopped
a draft drifts back towards its prior, so the request tries again now and then. The drafts of
one step share one budget (`n_max`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engine.speculation.draft_cost import DraftCost
from app.engine.speculation.draft_state import LONG, LONG_MATCH, SHORT, DraftState
from app.engine.speculation.ngram_index import NgramIndex
from app.engine.speculation.reply_memory import ReplyMemory

if TYPE_CHECKING:
    from app.engine.task import Task

SPEC_TYPES = ("none", "ngram-simple", "ngram-docs")
LEARN = 0.15  # weight of each verified draft token in a request's acceptance estimate
AGREEMENT = 16  # how far back a match's agreement with the context is counted
# A draft token must be expected to save this much of a step more than it costs: the estimates
# of its chance and of its cost both err, and where the two are close (a busy batch, where a
# draft token costs nearly what it saves) the error decides and the draft loses.
MARGIN = 0.1


class Speculator:
    def __init__(
        self,
        spec_type: str,
        ngram_size: int,
        n_max: int,
        n_min: int,
        replies: ReplyMemory | None,
        cost: DraftCost | None = None,
    ) -> None:
        if spec_type not in SPEC_TYPES:
            raise ValueError(f"unknown speculative decoding type {spec_type!r}")
        self.spec_type = spec_type
        self.ngram_size = ngram_size
        self.n_max = n_max  # draft tokens one step may carry, all slots together
        self.n_min = n_min  # a shorter draft is not worth verifying
        self.replies = replies if spec_type == "ngram-docs" else None
        self.cost = cost if cost is not None else DraftCost()  # fed by the stepper

    @property
    def enabled(self) -> bool:
        return self.spec_type != "none" and self.n_max > 0

    def drafts(self, decoding: list[tuple[Task, int]]) -> list[list[int]]:
        """A draft (maybe empty) for each (task, room) about to decode its next token; `room`:
        most draft tokens the task can take (context and max_tokens left)."""
        budget = self.n_max
        ratio = self.cost.ratio(len(decoding))
        out: list[list[int]] = []
        for task, room in decoding:
            draft = self._draft(task, min(room, budget), ratio) if budget > 0 else []
            budget -= len(draft)
            out.append(draft)
        return out

    def _draft(self, task: Task, room: int, ratio: float) -> list[int]:
        state = task.draft_state
        if state is None:
            state = task.draft_state = self._start(task)
        generated = task.generated
        state.context.extend(generated[state.n_synced :])
        state.n_synced = len(generated)
        draft, agreement = self._best_match(state, room)
        if not draft:
            return []
        evidence = LONG if agreement >= LONG_MATCH else SHORT
        n = worth_drafting(state.acceptance[evidence], ratio, len(draft))
        if n < max(self.n_min, 1):
            state.recover(evidence)
            return []
        state.last = evidence
        return draft[:n]

    @staticmethod
    def _best_match(state: DraftState, n: int) -> tuple[list[int], int]:
        """The draft whose source agrees longest with the end of the request's context: its
        own context (prompt and reply so far), or a past reply on its documents (which wins a
        tie: an answer to a question on the same documents, where the prompt's match is often
        a passage the answer leaves)."""
        history = state.context.tokens
        best, best_length = state.context.match(history, n, AGREEMENT)
        for reply in state.replies:
            draft, length = reply.match(history, n, AGREEMENT)
            if draft and length >= best_length:
                best, best_length = draft, length
        return best, best_length

    def _start(self, task: Task) -> DraftState:
        request = task.request
        context = NgramIndex(self.ngram_size, request.prompt.tokens)
        replies = []
        if self.replies is not None and request.documents:
            replies = self.replies.replies(request.cache_salt, request.documents)
        return DraftState(context, replies)

    def observe(self, task: Task, drafted: int, accepted: int) -> None:
        """A draft was verified: `accepted` tokens were taken, then one (if any was left) was
        not; each moves the request's acceptance estimate."""
        state = task.draft_state
        if state is None or drafted == 0:
            return
        p = state.acceptance[state.last]
        for _ in range(accepted):
            p += LEARN * (1.0 - p)
        if accepted < drafted:
            p -= LEARN * p
        state.acceptance[state.last] = p

    def finished(self, task: Task) -> None:
        """A request ended: its reply joins the memory of its documents."""
        request = task.request
        if self.replies is not None and request.documents and not request.background:
            prompt = request.prompt  # its last AGREEMENT tokens, not a copy of it all
            lead = [prompt[i] for i in range(max(len(prompt) - AGREEMENT, 0), len(prompt))]
            self.replies.add(request.cache_salt, request.documents, task.generated, lead)

    def forget(self, document_ids: set[str]) -> None:
        if self.replies is not None:
            self.replies.forget(document_ids)

    def reset(self) -> None:
        if self.replies is not None:
            self.replies.clear()


def worth_drafting(p: float, c: float, most: int = 64) -> int:
    """The longest draft whose every token is worth its cost with the margin: the largest i
    with p^i > c + MARGIN."""
    n, chance = 0, p
    while n < most and chance > c + MARGIN:
        n, chance = n + 1, chance * p
    return n
