"""`Scheduler`: the FIFO wait queue, admission, and what goes into each llama_decode.

Runs only on the engine thread. Each step carries one decode token for every generating task and
fills the rest of the batch with prefill chunks of admitted tasks in admission order (continuous
batching): a long prompt never stalls the streams that are already generating. A step may end
where a prompt ends, so its first token does not wait for the prompts behind it, where one more
step costs less than their tokens would delay it (measured: app/engine/core/step_cost.py).

Background work (a document's prefill into the prefix cache, an idle slot's next-turn boundary)
goes only into steps that carry no client work, in batches no larger than the engine allows
(`background` tokens, sized so one llama_decode, which cannot be interrupted, stays short). At
most one background task holds a slot, and only while no client task waits: a client's arrival
sends it back to the queue (what it computed stays cached, and its slot's KV is parked like an
idle slot's), so a client never waits for its slot nor decodes above its cells.

Which slot an admitted task takes is app/engine/core/slot_choice.py.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from app.engine.core.slot import Slot
from app.engine.core.slot_choice import best_source, choose_slot
from app.engine.core.step_cost import StepCost
from app.engine.llama.batch import Batch
from app.engine.request import RequestError
from app.engine.speculation.speculator import Speculator
from app.engine.task import Task


@dataclass(slots=True)
class Planned:
    """One task's share of a step: tokens added to the batch, and the logits row to sample."""

    task: Task | None  # None: an idle slot's tail (see Slot.tail)
    slot: Slot
    tokens: list[int] = field(default_factory=list)
    n_prompt: int = 0  # how many of `tokens` are prompt tokens
    row: int | None = None
    # Speculation: tokens guessed to follow the decode token, at the next positions, each with
    # its logits row. Not in `tokens`: the stepper commits the ones the model agrees with.
    draft: list[int] = field(default_factory=list)
    draft_rows: list[int] = field(default_factory=list)


# Shortest prefix worth waiting for while another task computes it (tokens).
MIN_SHARED_WAIT = 32


class Scheduler:
    def __init__(
        self,
        n_slots: int,
        similarity: float,
        speculator: Speculator | None = None,
        n_ctx_request: int = 0,
    ) -> None:
        self.slots = [Slot(i) for i in range(n_slots)]
        self.waiting: deque[Task] = deque()
        self.active: list[Task] = []  # admission order
        self.similarity = similarity
        # Drafts for generating client tasks (None: no speculation); a draft stays within the
        # KV cells one request may use (n_ctx_request).
        self.speculator = speculator if speculator is not None and speculator.enabled else None
        self.n_ctx_request = n_ctx_request
        # What one more step costs, in prompt tokens (timed by the stepper): whether a step ends
        # where a client's prompt ends (`_ends_step`).
        self.step_cost = StepCost()

    @property
    def has_work(self) -> bool:
        return bool(self.active or self.waiting)

    def next_tail_due(self) -> float | None:
        """When the earliest idle prefill may run (None: there is none)."""
        return min((s.tail_due for s in self.slots if s.tail), default=None)

    def enqueue(self, task: Task) -> None:
        self.waiting.append(task)

    def check_queue_room(self, limit: int, inbox: list[Task]) -> None:
        """Refuse (503) a request that would wait behind `limit` others (0: no limit); `inbox`:
        tasks submitted but not yet enqueued. Background tasks never count."""
        idle = sum(1 for s in self.slots if s.idle)
        waiting = sum(1 for t in (*self.waiting, *inbox) if not t.request.background)
        if limit and waiting - idle >= limit:
            retry = 1 + waiting // len(self.slots)  # a rough turn of the queue
            raise RequestError(
                f"the server is busy: {waiting} requests are waiting for a slot; retry later",
                code="unavailable",
                status=503,
                headers={"Retry-After": str(retry)},
            )

    def past_deadline(self, now: float) -> list[Task]:
        """Queued and running tasks past their time limit (to fail; a slot keeps its KV)."""
        tasks = (*self.waiting, *self.active)
        return [t for t in tasks if t.deadline is not None and now >= t.deadline and not t.done]

    def take_cancelled(self) -> list[Task]:
        """Remove cancelled tasks from the queue and from the active set; return them."""
        gone = [t for t in self.waiting if t.cancelled or t.done]
        if gone:
            self.waiting = deque(t for t in self.waiting if not (t.cancelled or t.done))
        gone_active = [t for t in self.active if t.cancelled or t.done]
        for task in gone_active:
            self.release(task)
        return gone + gone_active

    def choose_slot(self, task: Task) -> Slot | None:
        """The idle slot the task takes now, if any (`slot_choice.choose_slot`)."""
        return choose_slot(self.slots, task, self.similarity)

    def best_source(self, task: Task, exclude: Slot | None = None) -> tuple[Slot | None, int]:
        """The slot (idle or busy) whose KV holds the longest prefix of the task's prompt."""
        return best_source(self.slots, task, exclude)

    def _awaits_shared_prefill(self, task: Task) -> bool:
        """True if an admitted task is still computing a long prefix this one shares: waiting and
        then copying that KV beats computing the same prefix twice on a CPU-bound context."""
        if not task.cache_prompt:
            return False
        prompt, salt = task.request.prompt, task.request.cache_salt
        available = self.best_source(task)[1]
        for other in self.active:
            if other.prefilling and other.cache_prompt and other.request.cache_salt == salt:
                shared = other.request.prompt.common_prefix(prompt)
                if shared - available >= MIN_SHARED_WAIT and shared > other.n_done:
                    return True
        return False

    def next_admission(self, clients_arriving: bool = False) -> tuple[Task, Slot] | None:
        """The first waiting task (FIFO) that has a slot now; removes it from the queue.

        A task whose prefix another task is computing right now waits for it (it does not block
        the tasks behind it) and then copies it from that slot's KV. Background tasks go only
        while no client task waits or runs, or is being received (`clients_arriving`): they
        never take compute, a slot or KV cells from one, nor delay its admission with theirs (a
        client in the queue sends the running background task back to it first)."""
        if any(not t.request.background for t in self.waiting):
            self._pause_background()
        busy = self.busy_with_clients or clients_arriving
        background_running = any(t.request.background for t in self.active)
        for task in self.waiting:
            if task.request.background and (busy or background_running):
                continue
            if task.waiting_for is not None and not task.waiting_for.done():
                continue  # its cached prefix is being read from disk
            if self._awaits_shared_prefill(task):
                continue
            slot = self.choose_slot(task)
            if slot is not None:
                self.waiting.remove(task)
                return task, slot
        return None

    @property
    def busy_with_clients(self) -> bool:
        """A client task waits or runs (background tasks are not clients)."""
        return any(not t.request.background for t in (*self.waiting, *self.active))

    def _pause_background(self) -> None:
        """Send running background tasks back to the front of the queue, their slots idle: a
        client may take the slot, and admitting it parks the slot's KV to host memory like any
        idle slot's, so the client's cells are not placed above it (every decode attends over
        the cells up to the highest in use). What a task computed stays cached: it resumes from
        there. A task that has handed a token to its sink already runs to its end."""
        for task in [t for t in self.active if t.request.background]:
            if not task.done and not task.n_generated:
                self.release(task)
                task.requeue()
                self.waiting.appendleft(task)

    def bind(self, task: Task, slot: Slot) -> None:
        """The slot now serves the task; it alone holds the task's conversation from now on."""
        session = task.request.session
        for other in self.slots:
            if other.session is not None and other.session == session:
                other.session = None
        slot.session = session
        slot.task = task
        self.active.append(task)

    def release(self, task: Task) -> None:
        if task in self.active:
            self.active.remove(task)
        for slot in self.slots:
            if slot.task is task:
                slot.release()

    def slot_of(self, task: Task) -> Slot:
        return self.slots[task.slot_id]

    def plan(
        self, batch: Batch, now: float = 0.0, background: int = 0, speculate: bool = True
    ) -> list[Planned]:
        """Fill `batch` for one llama_decode; the slots' caches change only in `commit`.
        `background`: most tokens of background work the step may carry, and only when it
        carries nothing else (0: none). `speculate`: client tasks may carry drafts."""
        batch.clear()
        clients = [t for t in self.active if not t.request.background]
        planned = self._plan_tasks(batch, clients, batch.free, speculate, end_early=True)
        if planned or background <= 0 or self.busy_with_clients:
            return planned
        tasks = [t for t in self.active if t.request.background]
        planned = self._plan_tasks(batch, tasks, min(background, batch.free))
        # Idle slots' tails (a few tokens each) go whole, within the budget (the first always).
        used = 0
        for slot in self.slots if not planned else ():
            if not (slot.idle and slot.tail and now >= slot.tail_due):
                continue
            n = len(slot.tail)
            if n <= batch.free and (used == 0 or used + n <= background):
                batch.add_run(slot.tail, slot.cache.n_pos, slot.id)
                planned.append(Planned(None, slot, list(slot.tail)))
                used += n
        return planned

    def _plan_tasks(
        self,
        batch: Batch,
        tasks: list[Task],
        limit: int,
        speculate: bool = False,
        end_early: bool = False,
    ) -> list[Planned]:
        """Decode tokens of `tasks` first (generation never waits for prefill), then their
        drafts, then prefill chunks in admission order, at most `limit` tokens in all.
        `end_early`: the step may end where a prompt's prefill ends (`_ends_step`)."""
        planned: list[Planned] = []
        start = batch.n_tokens
        for task in tasks:
            if task.next_token is not None and batch.n_tokens - start < limit:
                slot = self.slot_of(task)
                row = batch.add(task.next_token, slot.cache.n_pos, slot.id, True)
                planned.append(Planned(task, slot, [task.next_token], 0, row))
        if speculate and planned and self.speculator is not None:
            self._add_drafts(batch, planned, limit - (batch.n_tokens - start))
        for n, task in enumerate(tasks):
            room = min(batch.free, limit - (batch.n_tokens - start))
            if not task.prefilling or room <= 0:
                continue
            slot = self.slot_of(task)
            prompt = task.request.prompt
            take = min(room, task.text_left)
            if take == 0:
                continue  # an image is next
            tokens = prompt.text_tokens(task.n_done, task.n_done + take)
            pos = slot.cache.n_pos
            row = None
            last = len(tokens) - 1
            completes = task.n_done + take == task.prompt_len
            for i, token in enumerate(tokens):
                r = batch.add(token, pos + i, slot.id, completes and i == last)
                if completes and i == last:
                    row = r
            planned.append(Planned(task, slot, tokens, take, row))
            if completes and end_early and self._ends_step(tasks[n + 1 :], room - take):
                break
        return planned

    def _ends_step(self, behind: list[Task], room: int) -> bool:
        """A prompt's prefill ends in this step with `room` tokens left: whether the step ends
        there rather than take the prefill of the prompts `behind` it (`StepCost.ends_step`)."""
        return self.step_cost.ends_step([t.text_left for t in behind if t.prefilling], room)

    def _add_drafts(self, batch: Batch, decoding: list[Planned], room: int) -> None:
        """Each decoding task's draft after its token: positions on from the token's, a
        logits row each. Within the batch room, the request's cells and its max_tokens."""
        assert self.speculator is not None
        wants = []
        for p in decoding:
            task = p.task
            assert task is not None
            left = self.n_ctx_request - p.slot.cache.n_pos - 2  # the token, then the draft
            if task.request.max_tokens is not None:
                left = min(left, task.request.max_tokens - task.n_generated - 1)
            wants.append((task, max(min(left, room), 0)))
        for p, draft in zip(decoding, self.speculator.drafts(wants), strict=True):
            draft = draft[: max(min(room, batch.free), 0)]
            pos = p.slot.cache.n_pos + 1  # the decode token's position, not yet committed
            p.draft = draft
            p.draft_rows = [batch.add(t, pos + i, p.slot.id, True) for i, t in enumerate(draft)]
            room -= len(draft)

    @staticmethod
    def commit(planned: list[Planned]) -> None:
        """The decode succeeded: the planned tokens are now in each slot's KV."""
        for p in planned:
            p.slot.cache.extend(p.tokens)
            if p.task is None:
                p.slot.tail = None
                continue
            p.task.n_done += p.n_prompt
            if p.n_prompt == 0:
                p.task.next_token = None
