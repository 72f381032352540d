"""`Task`: one request in flight, from queue to Finished/Failed.

The engine thread is the only writer of a Task's state except `cancelled`, which the HTTP side
sets (a single bool store) and the engine loop observes at the next step.

Invariant: a task's slot is released before its terminal event (Finished or Failed) goes to the
sink, so a client that has seen the end of its request finds the slot idle (a next request with
`id_slot` gets it at once).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from app.engine.core.text_stream import TextStream
from app.engine.events import Event, Failed, Finished, TextDelta, Timings, TokenLogprob
from app.engine.request import GenerationRequest
from app.engine.reuse_kinds import CacheSource, KvReuse, PrefixMatch
from app.engine.sampler import Sampler

if TYPE_CHECKING:
    from app.engine.blend.blend_gate import Agreement
    from app.engine.speculation.draft_state import DraftState

_ids = itertools.count(1)

Sink = Callable[[Event], None]


class Task:
    def __init__(self, request: GenerationRequest, sink: Sink, cache_prompt: bool) -> None:
        self.id = next(_ids)
        self.request = request
        self.sink = sink
        self.cache_prompt = cache_prompt
        self.cancelled = False
        self.done = False
        # Frees the task's slot; set by the engine when it admits the task to a slot.
        self.on_close: Callable[[], None] | None = None
        # A read of the task's best cached prefix from disk, started while it waits in the
        # queue: (disk entry, future of its bytes). Not admitted before `waiting_for` is done.
        self.prefetched: tuple[object, Future] | None = None
        self.waiting_for: Future | None = None
        # Set when admitted to a slot.
        self.sampler: Sampler | None = None
        self.n_cached = 0  # prompt tokens reused from the slot's KV
        self.n_done = 0  # prompt tokens whose KV exists (cached + evaluated so far)
        self.next_token: int | None = None  # sampled, not yet decoded into the KV
        # The token sampled last and never decoded into the KV, when it ended generation by
        # end-of-generation or by the token limit; with finish_reason, what the slot's idle
        # prefill of a conversation's continuation needs.
        self.ended_on: int | None = None
        self.finish_reason: str | None = None
        self.n_generated = 0
        self.generated: list[int] = []  # every sampled token that counts as output, in order
        # Speculation (app/engine/speculation/speculator.py): its state, and llama-server's draft
        # counts.
        self.draft_state: DraftState | None = None
        self.draft_n = 0
        self.draft_n_accepted = 0
        self.text = TextStream(request.stop)
        # Tokens (and their logprobs) whose text is still held back by the TextStream.
        self._held_tokens: list[int] = []
        self._held_logprobs: list[TokenLogprob] = []
        self.slot_id = -1
        self.cache_source = CacheSource.NONE  # where the cached prefix came from
        self.chunk_n = 0  # of n_cached: placed from chunk KV (blend), not computed
        self.kv_reuse: KvReuse | None = None  # set when the request asked for blend
        self.kv_reuse_reason: str | None = None  # why blend fell back
        self.kv_reuse_agreement: Agreement | None = None  # blend's measured, when it blended
        self.deadline: float | None = None  # time.monotonic() past which the request fails
        self.t_queued = time.perf_counter()
        self.t_start = 0.0
        self.t_first = 0.0

    @property
    def prompt_len(self) -> int:
        return len(self.request.prompt)

    @property
    def prefilling(self) -> bool:
        return self.n_done < self.prompt_len

    @property
    def text_left(self) -> int:
        """Prompt tokens to prefill next: text only, up to the next image (the engine evaluates
        images itself, between steps)."""
        prompt = self.request.prompt
        end = next((s for s, _ in prompt.media() if s >= self.n_done), self.prompt_len)
        return end - self.n_done

    def start(self, slot_id: int, match: PrefixMatch, sampler: Sampler) -> None:
        self.slot_id = slot_id
        self.cache_source = match.source
        self.n_cached = match.cached
        self.n_done = match.cached
        self.sampler = sampler
        self.t_start = time.perf_counter()

    def requeue(self) -> None:
        """Back to the queue from a slot a client task took (background tasks only): the task
        starts again at its next admission, from whatever prefix is cached by then."""
        assert self.request.background and self.n_generated == 0  # nothing was sent yet
        if self.sampler is not None:
            self.sampler.close()
        self.sampler, self.on_close, self.next_token = None, None, None
        self.draft_state = None
        self.slot_id, self.n_cached, self.n_done = -1, 0, 0
        self.cache_source = CacheSource.NONE

    def on_token(
        self,
        token: int,
        piece: bytes,
        is_eog: bool,
        room_left: int,
        logprob: TokenLogprob | None = None,
    ) -> bool:
        """Handle one sampled token; True if generation goes on (the token must be decoded next).

        `room_left` is how many more tokens the slot's context can hold after this one.
        """
        if self.n_generated == 0:
            self.t_first = time.perf_counter()
        if is_eog and not self.request.ignore_eos:
            self.ended_on = token
            self.finish("stop")
            return False
        self.n_generated += 1
        self.generated.append(token)
        self._held_tokens.append(token)
        if logprob is not None:
            self._held_logprobs.append(logprob)
        self._emit(self.text.push(piece))
        if self.text.stop_hit is not None:
            self.finish("stop")
            return False
        max_tokens = self.request.max_tokens
        if (max_tokens is not None and self.n_generated >= max_tokens) or room_left <= 0:
            self.ended_on = token
            self.finish("length")
            return False
        self.next_token = token
        return True

    def next_turn_tail(self, is_eog: Callable[[int], bool]) -> list[int] | None:
        """After a chat reply: what the next turn's prompt will hold after the slot's KV, for the
        idle slot to prefill ahead (None: nothing predictable).

        A reply that ended on end-of-turn continues with the template's continuation (which
        starts with that token); one cut by max_tokens with its last, undecoded token and then
        the continuation. A stop-string cut returns shortened text: nothing is predictable.
        """
        cont = self.request.continuation
        if not cont or not self.cache_prompt or self.ended_on is None:
            return None
        if self.finish_reason == "stop" and self.ended_on == cont[0]:
            return list(cont)
        if self.finish_reason == "length" and not is_eog(self.ended_on):
            return [self.ended_on, *cont]
        return None

    def _emit(self, text: str) -> None:
        if not text:
            return
        logprobs = self._held_logprobs if self.request.logprobs is not None else None
        timings = self.timings() if self.request.timings_per_token else None
        self.sink(TextDelta(text, self._held_tokens, logprobs, timings))
        self._held_tokens, self._held_logprobs = [], []

    def finish(self, reason: str) -> None:
        if self.done:
            return
        self.finish_reason = reason
        self._emit(self.text.finish())
        final = Finished(
            reason,
            self.prompt_len,
            self.n_generated,
            self.n_cached,
            self.timings(),
            self.text.stop_hit,
        )
        self._close()
        self.sink(final)

    def fail(self, message: str, status: int = 500, code: str = "server_error") -> None:
        if self.done:
            return
        self._close()
        self.sink(Failed(message, status, code))

    def timings(self) -> Timings:
        now = time.perf_counter()
        t_first = self.t_first or now
        return Timings(
            cache_n=self.n_cached,
            prompt_n=max(self.n_done - self.n_cached, 0),
            prompt_ms=(t_first - self.t_start) * 1000.0 if self.t_start else 0.0,
            predicted_n=self.n_generated,
            predicted_ms=(now - t_first) * 1000.0 if self.t_first else 0.0,
            slot=self.slot_id,
            cache_source=self.cache_source,
            ttft_ms=(self.t_first - self.t_queued) * 1000.0 if self.t_first else None,
            chunk_n=self.chunk_n,
            kv_reuse=self.kv_reuse,
            kv_reuse_reason=self.kv_reuse_reason,
            kv_reuse_agreement=(
                self.kv_reuse_agreement.as_dict() if self.kv_reuse_agreement else None
            ),
            draft_n=self.draft_n,
            draft_n_accepted=self.draft_n_accepted,
        )

    def _close(self) -> None:
        """Before the terminal event: the task is done and its slot free."""
        self.done = True
        self.next_token = None
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close()
