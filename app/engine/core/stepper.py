"""`Stepper`: one engine step, the only place a batch of tokens goes through llama_decode.

A step evaluates the images next in prompts being prefilled (the vision helper runs its own
llama_decode), plans one batch across the slots (decode tokens first, then prefill, idle prefill
only when nothing else runs), decodes it, commits what was decoded to the slots' caches and
samples a token for every row that asked for logits.

Engine thread only, like every llama.cpp call that computes.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from app.engine.background_pacer import BackgroundPacer
from app.engine.core.scheduler import Planned, Scheduler
from app.engine.core.slot import Slot
from app.engine.decode_counts import DecodeCounts
from app.engine.events import TokenLogprob
from app.engine.kv.kv_room import make_room
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model
from app.engine.llama.sampled_probs import sampled_probs
from app.engine.llama.vision import Vision
from app.engine.speculation.speculator import Speculator
from app.engine.task import Task

log = logging.getLogger(__name__)


class Stepper:
    def __init__(
        self,
        model: Model,
        scheduler: Scheduler,
        reuse: PrefixReuse,
        n_ctx_request: int,
        pacer: BackgroundPacer,
        vision: Vision | None = None,
        speculator: Speculator | None = None,
    ) -> None:
        self.model, self.scheduler, self.reuse = model, scheduler, reuse
        self.speculator = speculator  # told of verified drafts and of finished replies
        self.pacer = pacer  # sizes the batches of background work
        self.vision = vision  # image input (--mmproj); opened on the engine thread
        self.n_ctx_request = n_ctx_request  # KV cells one request may use (<= n_ctx)
        self._batch = model.new_batch()  # closed by `close`
        self.counts = DecodeCounts()  # client steps, for llama-server's /metrics

    def close(self) -> None:
        self._batch.close()

    def warmup(self) -> None:
        # The first llama_decode pays one-off setup costs; pay them before the first request.
        batch = self.model.new_batch()
        batch.add(self.model.bos if self.model.bos >= 0 else 0, 0, 0, True)
        self.model.decode(batch)
        batch.close()
        self.model.clear()

    def fail_active(self) -> None:
        """A step raised: fail the running requests and erase their slots' KV, which may be
        half written."""
        for task in list(self.scheduler.active):
            self.scheduler.slot_of(task).erase(self.model)
            task.fail("internal error while generating")
            self.scheduler.release(task)

    def step(self, background: bool = False) -> bool:
        """One llama_decode; False if nothing was planned. `background`: the step may carry
        background work (paced), when it carries nothing for a client."""
        if self.vision is not None:
            self._eval_media()
        budget = self.pacer.tokens() if background else 0
        planned = self.scheduler.plan(self._batch, time.monotonic(), budget)
        if not planned:
            return False
        t0 = time.perf_counter()
        status = self.model.decode(self._batch)
        if status == 1 and any(p.draft for p in planned):
            # No KV room with the drafts: the same step without them (nothing was written).
            planned = self.scheduler.plan(self._batch, time.monotonic(), budget, speculate=False)
            status = self.model.decode(self._batch)
        if status == 1 and make_room(self.scheduler, self.reuse, self.model, planned):
            return True  # room was made or a task was dropped: plan again next step
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}")
        seconds = time.perf_counter() - t0
        self.scheduler.step_cost.observe(self._batch.n_tokens, seconds)
        clients = [p for p in planned if p.task is not None and not p.task.request.background]
        if not clients:
            self.pacer.observe(self._batch.n_tokens, seconds)
        else:
            self.counts.count(len(clients), sum(1 for p in clients if p.draft))
            if self.speculator is not None and all(p.n_prompt == 0 and p.task for p in planned):
                # Generating slots only: what their tokens and the drafts cost (DraftCost).
                drafts = sum(len(p.draft) for p in planned)
                self.speculator.cost.observe(len(planned), drafts, seconds)
        self.scheduler.commit(planned)
        self._sample(planned)
        return True

    def _eval_media(self) -> None:
        """Evaluate the images that are next in prompts being prefilled (text prefill and
        decoding go on in the next step)."""
        assert self.vision is not None
        for task in list(self.scheduler.active):
            if not task.prefilling or task.done:
                continue
            slot = self.scheduler.slot_of(task)
            try:
                self.vision.prefill_next(task, slot)
            except Exception as e:  # no room in the KV, or the projector failed
                log.warning("image of task %d failed: %s", task.id, e)
                slot.erase(self.model)  # the image may be half in the KV
                task.fail(f"could not evaluate the image: {e}", status=503, code="unavailable")
                self.scheduler.release(task)

    def _sample(self, planned: list[Planned]) -> None:
        model = self.model
        for p in planned:
            task = p.task
            if task is None or p.row is None or task.done:
                continue
            if p.draft:
                self._verify(p)
                continue
            # Read only where needed: each ctypes call lets the HTTP thread take the GIL.
            logits = None
            if p.n_prompt and not task.prefilling:  # the row of the prompt's last token
                logits = model.logits(p.row)
                p.slot.keep_logits(logits)
            token = task.sampler.sample(model.ctx, p.row)
            if logits is None and task.request.logprobs is not None:
                logits = model.logits(p.row)
            self._deliver(task, p.slot, token, logits)

    def _verify(self, p: Planned) -> None:
        """Sample the decode token's row, then each draft row while the samples equal the
        draft: an equal sample's token is in the KV already (committed now); the first sample
        that differs, or follows the whole draft, is the next token to decode. Every sample is
        drawn as without speculation (same rows' logits, sampler advanced token by token), so
        the output is the same. The cells of the rejected draft tokens are removed."""
        task, slot, draft = p.task, p.slot, p.draft
        assert task is not None and task.sampler is not None and p.row is not None
        accepted = 0
        for i, row in enumerate([p.row, *p.draft_rows]):
            token = task.sampler.sample(self.model.ctx, row)
            logits = self.model.logits(row) if task.request.logprobs is not None else None
            self._deliver(task, slot, token, logits)
            if task.done or i == len(draft) or token != draft[i]:
                break
            slot.cache.extend([token])  # the draft token at this position stands
            accepted += 1
        if accepted < len(draft):
            self.model.seq_rm(slot.id, slot.cache.n_pos, -1)
        task.draft_n += len(draft)
        task.draft_n_accepted += accepted
        if self.speculator is not None:
            self.speculator.observe(task, len(draft), accepted)

    def sample_repeat(self, task: Task, slot: Slot) -> None:
        """First token of a task whose whole prompt the slot holds with its logits kept (an
        exact repeat, admitted with nothing to prefill): sampled from those, no decode."""
        logits = slot.repeat_logits(task.request.prompt, task.request.cache_salt)
        assert logits is not None and task.sampler is not None
        self._deliver(task, slot, task.sampler.sample_logits(logits), logits)

    def _deliver(self, task: Task, slot: Slot, token: int, logits: np.ndarray | None) -> None:
        """Hand a sampled token to its task (`logits`: its raw logits, for logprobs)."""
        model = self.model
        room_left = self.n_ctx_request - slot.cache.n_pos - 1
        n_top = task.request.logprobs
        logprob = None
        if n_top is not None and logits is not None and task.request.post_sampling:
            sampling = task.request.sampling
            logprob = sampled_probs(logits, token, n_top, sampling, model.token_to_piece)
        elif n_top is not None and logits is not None:
            logprob = token_logprob(model, logits, token, n_top)
        # A task that ends here has released its slot (Task._close -> _closed) already.
        task.on_token(token, model.token_to_piece(token), model.is_eog(token), room_left, logprob)
        if task.done and self.speculator is not None:
            self.speculator.finished(task)


def token_logprob(model: Model, row: np.ndarray, token: int, n_top: int) -> TokenLogprob:
    """Log-softmax of one row of raw logits: the token's logprob and the n_top best."""
    logits = row.astype(np.float64)
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())

    def entry(t: int) -> tuple[str, float, list[int]]:
        raw = model.token_to_piece(t)
        return raw.decode("utf-8", "replace"), float(logprobs[t]), list(raw)

    ids: list[int] = []
    if n_top > 0:
        best = np.argpartition(-logprobs, n_top)[:n_top]
        ids = [int(t) for t in best[np.argsort(-logprobs[best])]]
    text, value, raw = entry(token)
    return TokenLogprob(text, value, raw, [entry(t) for t in ids], token, ids)
