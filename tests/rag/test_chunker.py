from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.chunker import Chunker
from rag.loader import LoadedDocument


def words(text: str) -> int:  # a stand-in tokenizer: one token per word
    return len(text.split())


sentences = st.lists(
    st.text(alphabet="abcdé xyz", min_size=1, max_size=40).map(lambda s: s.strip() + "."),
    min_size=1,
    max_size=8,
)
paragraphs = st.lists(sentences.map(" ".join), min_size=1, max_size=12).map("\n\n".join)


@settings(max_examples=60, deadline=None)
@given(paragraphs)
def test_chunks_cover_the_text_in_order_and_map_back_to_it(text: str):
    chunks = Chunker(words, chunk_tokens=16, overlap_tokens=0).split(LoadedDocument(text, "text"))
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
    assert [c.char_start for c in chunks] == sorted(c.char_start for c in chunks)
    covered = set()
    for c in chunks:
        covered.update(range(c.char_start, c.char_end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_chunks_respect_the_size_and_split_at_paragraphs():
    text = "\n\n".join(f"Paragraph {i} has a few words in it." for i in range(10))
    chunks = Chunker(words, chunk_tokens=20, overlap_tokens=0).split(LoadedDocument(text, "text"))
    assert len(chunks) > 1
    assert all(words(c.text) <= 20 for c in chunks)
    assert all(c.text.startswith("Paragraph") and c.text.endswith(".") for c in chunks)


def test_pages_follow_the_chunks():
    text = "page one.\n\npage two."
    doc = LoadedDocument(text, "pdf", [0, text.index("page two")])
    chunks = Chunker(words, chunk_tokens=8, overlap_tokens=0).split(doc)
    assert [c.page for c in chunks] == [1, 2]
