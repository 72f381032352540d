"""`Ending`: a generation request's end hooks (metrics, the request log line and, for sessions,
storing the reply), run exactly once however the request ends: finished, failed, its client gone
or the server shutting down.

The responder (app/api/responder.py) calls it when the engine's last event arrives and again on
every way out of the response, where it does nothing the second time. Until the hooks have run
it stays in `Services.inflight`, which shutdown waits on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.api.outcome import RequestOutcome
from app.api.services import Services
from app.chat.turn import TurnRecorder, TurnResult
from app.engine.request import GenerationRequest
from app.engine.task import Task

log = logging.getLogger(__name__)

EndHook = Callable[[TurnResult], None]


class Ending:
    """Runs the end hooks once; a failing hook is logged and never breaks the response.

    On the normal paths the hooks (which may write to the database) run in a worker thread so
    the event loop keeps serving; on a cancellation path they run inline, as there is nothing
    left to await."""

    def __init__(
        self,
        services: Services,
        request: GenerationRequest,
        route: str,
        on_end: list[EndHook],
        rec: TurnRecorder,
        task: Task,
    ) -> None:
        self.services, self.request, self.rec = services, request, rec
        self.route = route  # "chat" | "completion" | "session" (metrics label)
        self.on_end = on_end  # the reply's own hooks, run after the metrics
        # A request whose client went away ends without a Finished event reaching us: its slot
        # and token counts are read from the task (ints the engine thread wrote).
        self.task = task
        self.done = False
        services.inflight.add(self)

    async def finish(self) -> None:
        if not self.done:
            self.done = True  # before the await: a cancellation there must not run them twice
            await asyncio.to_thread(self._run, self.rec.result())

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self._run(self.rec.result())

    def _run(self, result: TurnResult) -> None:
        try:
            for hook in [self._observe, *self.on_end]:
                try:
                    hook(result)
                except Exception:
                    log.exception("end-of-request hook failed")
        finally:
            self.services.inflight.discard(self)

    def _observe(self, result: TurnResult) -> None:
        done, failed, task = result.finished, result.failed, self.task
        timings = done.timings if done is not None else None
        self.services.metrics.observe(
            RequestOutcome(
                route=self.route,
                outcome=result.status,
                status=failed.status if failed is not None else 200,
                slot=timings.slot if timings is not None else task.slot_id,
                session_id=self.request.session,
                prompt_tokens=len(self.request.prompt),
                cached_tokens=done.cached_tokens if done is not None else task.n_cached,
                cache_source=timings.cache_source if timings is not None else task.cache_source,
                completion_tokens=(
                    done.completion_tokens if done is not None else task.n_generated
                ),
                ttft_s=result.ttft_s,
                e2e_s=result.e2e_s,
                finish_reason=done.finish_reason if done is not None else None,
                draft_tokens=task.draft_n,
                draft_tokens_accepted=task.draft_n_accepted,
                prompt_ms=timings.prompt_ms if timings is not None else 0.0,
                predicted_ms=timings.predicted_ms if timings is not None else 0.0,
            )
        )
