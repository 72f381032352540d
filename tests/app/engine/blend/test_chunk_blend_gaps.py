"""ChunkBlend's gaps on a small fake of llama.cpp's memory (positions per sequence): every
chunk is placed, then each gap is decoded in order; a gap without room cuts the slot back to
it and only the chunks before it count. Where blend's quality gate turns it off, nothing is
placed and the task says why; where it is forced on, the task carries the measured agreement.
A chunk's KV loads from a tier, is computed then, or finds no room, and says which."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from app.engine.blend.blend_gate import Agreement, BlendGate
from app.engine.blend.chunk_blend import BlendStats, ChunkBlend, ChunkLoad, Loaded
from app.engine.blend_plan import BlendPlan, ChunkSpan
from app.engine.core.slot import Slot
from app.engine.request import GenerationRequest
from app.engine.reuse_kinds import KvReuse
from app.engine.task import Task
from mm.token_sequence import TokenSequence

SCRATCH = 7
K = 2


class FakeBatch:
    def __init__(self) -> None:
        self.runs: list[tuple[list[int], int, int]] = []

    def clear(self) -> None:
        self.runs = []

    def add_run(self, tokens: list[int], pos: int, seq: int) -> None:
        self.runs.append((list(tokens), pos, seq))

    def close(self) -> None:
        pass


class FakeModel:
    """Positions each sequence holds; a decode must follow the sequence's last position (as
    llama.cpp requires), and fails once `room` decodes have been made."""

    scratch_seq = SCRATCH
    rope_type = -1  # LLAMA_ROPE_TYPE_NONE: chunks are shifted in llama.cpp
    n_batch = 512

    def __init__(self, room: int = 100) -> None:
        self.seqs: dict[int, set[int]] = {}
        self.room = room

    def new_batch(self) -> FakeBatch:
        return FakeBatch()

    def blend_unsupported(self) -> str | None:
        return None

    def decode(self, batch: FakeBatch) -> int:
        if self.room == 0:
            return 1
        self.room -= 1
        for tokens, pos, seq in batch.runs:
            held = self.seqs.setdefault(seq, set())
            assert pos == max(held, default=-1) + 1, "a batch must follow the positions held"
            held.update(range(pos, pos + len(tokens)))
        return 0

    def state_restore(self, seq: int, data: bytes) -> bool:
        self.seqs[seq] = set(range(len(data)))  # the state: head + chunk, one byte a token
        return True

    def seq_shift(self, seq: int, p0: int, p1: int, delta: int) -> None:
        held = self.seqs.get(seq, set())
        moved = {p for p in held if p0 <= p < p1}
        self.seqs[seq] = (held - moved) | {p + delta for p in moved}

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        got = {p for p in self.seqs.get(src, set()) if p0 <= p < p1}
        self.seqs.setdefault(dst, set()).update(got)

    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        end = p1 if p1 >= 0 else 1 << 30
        self.seqs[seq] = {p for p in self.seqs.get(seq, set()) if not p0 <= p < end}
        return True

    def seq_clear(self, seq: int) -> None:
        self.seqs[seq] = set()


@dataclass
class Stored:
    data: bytes


class FakeChunks:
    """Every chunk's KV is held (head + chunk)."""

    def get(self, salt: str, head: list[int], tokens: tuple[int, ...]) -> Stored:
        return Stored(bytes(len(head) + len(tokens)))


HEAD = [1, 2, 3]
CHUNKS = {"a": tuple(range(10, 20)), "b": tuple(range(20, 30)), "c": tuple(range(30, 40))}


def blend_request(
    room: int, gate: BlendGate | None = None
) -> tuple[FakeModel, Task, Slot, list[ChunkSpan]]:
    prompt = [*HEAD]
    spans = []
    for name, tokens in CHUNKS.items():
        prompt += [5, 6]  # a source's header: in no chunk
        spans.append(ChunkSpan(len(prompt), name, tokens))
        prompt += tokens
    prompt += [7, 8, 9]  # the question
    request = GenerationRequest(TokenSequence(prompt), blend=BlendPlan(HEAD, spans))
    model = FakeModel(room)
    blend = ChunkBlend(model, FakeChunks(), gate or BlendGate(K), set())  # type: ignore[arg-type]
    task, slot = Task(request, lambda event: None, True), Slot(0)
    model.seqs[0] = set(range(len(HEAD)))  # prefix reuse gave the head
    slot.cache.extend(HEAD)
    task.n_done = len(HEAD)
    blend.apply(task, slot)
    return model, task, slot, spans


def test_every_gap_is_filled_and_the_slot_holds_the_prompt_up_to_the_last_chunk():
    model, task, slot, spans = blend_request(room=100)
    assert task.n_done == spans[-1].end == len(slot.cache)
    assert model.seqs[0] == set(range(spans[-1].end))
    assert model.seqs[SCRATCH] == set()
    assert slot.documents == {"a", "b", "c"}
    assert slot.blended_from == spans[0].start + K
    assert task.chunk_n == sum(len(CHUNKS[s.document_id]) - K for s in spans)


def test_a_gap_without_room_cuts_the_slot_back_to_it():
    model, task, slot, spans = blend_request(room=1)  # the first gap's decode only
    assert task.n_done == spans[0].end == len(slot.cache)
    assert model.seqs[0] == set(range(spans[0].end))  # nothing placed after it is left
    assert model.seqs[SCRATCH] == set()
    assert slot.documents == {"a"}
    assert task.chunk_n == len(CHUNKS["a"]) - K


def test_a_model_the_gate_turns_off_keeps_prefix_reuse_and_says_why():
    why = "blend is off for this model: its blended answers matched full prefill in 0%"
    model, task, slot, _ = blend_request(room=100, gate=BlendGate(K, why, Agreement(K, 0.0, 0.4)))
    assert (task.kv_reuse, task.kv_reuse_reason) == (KvReuse.PREFIX, why)
    assert task.n_done == len(HEAD) == len(slot.cache) and task.chunk_n == 0
    assert model.seqs[0] == set(range(len(HEAD))) and slot.blended_from is None
    timings = task.timings().as_dict()
    assert timings["kv_reuse_reason"] == why and "kv_reuse_agreement" not in timings


def test_forced_blend_places_the_chunks_and_its_reply_carries_the_measured_agreement():
    measured = Agreement(K, 0.0, 0.4)
    _, task, _, spans = blend_request(room=100, gate=BlendGate(K, None, measured, forced=True))
    assert task.kv_reuse is KvReuse.BLEND and task.kv_reuse_reason is None
    assert task.n_done == spans[-1].end
    timings = task.timings().as_dict()
    assert timings["kv_reuse_agreement"] == measured.as_dict()
    assert measured.as_dict() == {"k": K, "exact_greedy": 0.0, "f1": 0.4, "questions": 12}
    assert "kv_reuse_reason" not in timings
    # A model nobody measured, forced: the agreement is unknown, and said so.
    _, unmeasured, _, _ = blend_request(room=100, gate=BlendGate(K, None, None, forced=True))
    assert unmeasured.timings().as_dict()["kv_reuse_agreement"] is None


class KeepingChunks:
    """No chunk's KV is held yet: each is computed, then kept."""

    def __init__(self) -> None:
        self.host = SimpleNamespace(pool=None)  # the pool blobs are made from (the fake's: none)
        self.kept: list[str] = []

    def get(self, salt: str, head: list[int], tokens: tuple[int, ...]) -> None:
        return None

    def put(self, salt: str, head, chunk, blob: bytes, document_id: str) -> None:  # noqa: ANN001
        self.kept.append(document_id)


class KeepingModel(FakeModel):
    def state_blob(self, seq: int, pool: object) -> bytes:
        return bytes(len(self.seqs.get(seq, ())))


def test_a_chunk_loads_after_the_head_from_a_tier_or_computed_now_or_not_for_want_of_room():
    span = ChunkSpan(len(HEAD) + 2, "a", CHUNKS["a"])
    held = ChunkBlend(FakeModel(), FakeChunks(), BlendGate(K), set())  # type: ignore[arg-type]
    assert held.load_chunk("", HEAD, span) == ChunkLoad(Loaded.AFTER_HEAD, len(HEAD), fresh=False)
    assert (held.stats.placed, held.stats.computed) == (1, 0)

    chunks = KeepingChunks()
    computed = ChunkBlend(KeepingModel(), chunks, BlendGate(K), set())  # type: ignore[arg-type]
    loaded = computed.load_chunk("", HEAD, span)
    assert loaded == ChunkLoad(Loaded.AFTER_HEAD, len(HEAD), fresh=True)
    assert (computed.stats.placed, computed.stats.computed, chunks.kept) == (1, 1, ["a"])

    full = KeepingModel(room=0)
    no_room = ChunkBlend(full, KeepingChunks(), BlendGate(K), set())  # type: ignore[arg-type]
    assert no_room.load_chunk("", HEAD, span) == ChunkLoad(Loaded.NO_ROOM)
    assert no_room.stats == BlendStats() and full.seqs[SCRATCH] == set()
