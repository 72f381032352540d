"""Background work (a document's prefill) never holds up a client request: the real engine."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.engine.engine import Engine
from app.engine.events import Event, Finished, TextDelta
from app.engine.request import GenerationRequest
from app.engine.sampler import SamplingParams
from app.engine.task import Task
from mm.token_sequence import TokenSequence
from tests.app.engine.test_engine import prompt_of, started
from tests.engine_parts import parts_of

GREEDY = SamplingParams(temperature=0.0)
LONG = " ".join(
    f"Chapter {i} tells of rivers, stones and the people who crossed them." for i in range(12)
)


@dataclass
class Recorder:
    """A sink on the engine thread: every event, and a flag once the task ended."""

    events: list[Event] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, Finished):
            self.ended.set()

    @property
    def finished(self) -> Finished:
        assert self.ended.wait(600), self.events  # a guard against a hang, not a timing
        return next(e for e in self.events if isinstance(e, Finished))


@dataclass
class DecodeLog:
    """What each llama_decode of the engine carried: its size, and the background task's
    progress and whether the client task was admitted when it began."""

    rows: list[tuple[int, int, bool]] = field(default_factory=list)
    on_decode: list = field(default_factory=list)  # callbacks run before a decode


@contextmanager
def logged(engine: Engine, background: list[Task], client: list[Task]) -> Iterator[DecodeLog]:
    log = DecodeLog()
    decode = parts_of(engine).model.decode

    def logging_decode(batch):  # noqa: ANN001, ANN202 (the Model method's own types)
        bg = background[0].n_done if background else -1
        admitted = bool(client) and client[0].slot_id >= 0
        log.rows.append((batch.n_tokens, bg, admitted))
        for fn in list(log.on_decode):
            fn(len(log.rows) - 1)
        return decode(batch)

    parts_of(engine).model.decode = logging_decode  # type: ignore[method-assign]
    try:
        yield log
    finally:
        parts_of(engine).model.decode = decode  # type: ignore[method-assign]


def background_request(engine: Engine) -> GenerationRequest:
    return GenerationRequest(prompt_of(engine, LONG), GREEDY, max_tokens=1, background=True)


def test_a_client_request_is_admitted_before_the_next_background_batch(model_path: str):
    # A budget of ~0 ms: every background batch has the pacer's fewest tokens.
    with started(model_path, n_ctx=4096, n_parallel=2, background_batch_ms=0.001) as eng:
        bg_sink, client_sink = Recorder(), Recorder()
        bg_tasks: list[Task] = []
        client_tasks: list[Task] = []
        submitted_at: list[int] = []
        with logged(eng, bg_tasks, client_tasks) as log:

            def submit_client(i: int) -> None:  # engine thread, before the 4th bg batch
                if i == 3 and not client_tasks:
                    request = GenerationRequest(
                        prompt_of(eng, "Name a colour."), GREEDY, max_tokens=8, ignore_eos=True
                    )
                    client_tasks.append(eng.submit(request, client_sink))
                    submitted_at.append(i)

            log.on_decode.append(submit_client)
            bg_tasks.append(eng.submit(background_request(eng), bg_sink))
            assert client_sink.finished.finish_reason == "length"
            bg = bg_sink.finished
        assert bg.finish_reason == "length"
        i = submitted_at[0]
        rows = log.rows
        # Before the client came, background batches of the pacer's size went one by one.
        assert all(size <= 8 for size, _, _ in rows[: i + 1])
        # The decode after the one in flight at submission already serves the client...
        assert rows[i + 1][2]
        # ...and the background task makes no progress until the client's reply ended.
        assert client_sink.finished.completion_tokens == 8  # a prefill and 7 decodes
        during = rows[i + 1 : i + 1 + 8]
        assert len({bg_done for _, bg_done, _ in during}) == 1, during
        # Then it went on to the end of its prompt.
        assert rows[-1][1] > during[0][1]


def test_a_client_takes_the_slot_of_a_background_task_which_resumes_from_its_cache(
    model_path: str,
):
    with started(model_path, n_ctx=2048, n_parallel=1, background_batch_ms=0.001) as eng:
        bg_sink, client_sink = Recorder(), Recorder()
        bg_tasks: list[Task] = []
        client_tasks: list[Task] = []
        with logged(eng, bg_tasks, client_tasks) as log:

            def submit_client(i: int) -> None:
                if i == 4 and not client_tasks:
                    request = GenerationRequest(prompt_of(eng, "Say hi."), GREEDY, max_tokens=4)
                    client_tasks.append(eng.submit(request, client_sink))

            log.on_decode.append(submit_client)
            bg_tasks.append(eng.submit(background_request(eng), bg_sink))
            text = "".join(e.text for e in client_sink.events if isinstance(e, TextDelta))
            assert client_sink.finished.finish_reason in ("stop", "length"), text
            bg = bg_sink.finished
        # The one slot went to the client; the background task came back afterwards and
        # started from the part of its prompt it had computed (kept in host memory).
        assert client_sink.finished.cached_tokens == 0
        assert bg.finish_reason == "length" and bg.cached_tokens >= 16


def test_wait_for_quiet_blocks_while_a_client_request_runs(model_path: str):
    with started(model_path, n_ctx=2048, n_parallel=2) as eng:
        assert eng.wait_for_quiet(timeout=0)
        sink = Recorder()
        first = threading.Event()
        request = GenerationRequest(
            prompt_of(eng, "Count to ninety."), GREEDY, max_tokens=256, ignore_eos=True
        )

        def on_event(event: Event) -> None:
            sink(event)
            if isinstance(event, TextDelta):
                first.set()

        eng.submit(request, on_event)
        assert first.wait(60)
        assert not eng.wait_for_quiet(timeout=0)  # the request is generating
        assert sink.finished.completion_tokens == 256
        assert eng.wait_for_quiet(timeout=30)
        # A background request does not count as a client.
        eng.submit(
            GenerationRequest(TokenSequence([1, 2, 3]), GREEDY, max_tokens=1, background=True),
            Recorder(),
        )
        assert eng.wait_for_quiet(timeout=30)
