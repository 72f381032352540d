"""Token-level F1 of two answers, as SQuAD scores a prediction against its reference.

Both texts are normalized the SQuAD way (lower case, punctuation and the articles a / an / the
dropped, whitespace collapsed) and compared as bags of words: F1 is the harmonic mean of the
share of the prediction's words found in the reference and the share of the reference's words
found in the prediction. Two empty answers agree (1.0); an empty one against words, 0.0.
bench/blend_quality.py scores blend's greedy answer against full prefill's with it: 1.0 is the
same words, a partial score says how much of the answer survived.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> list[str]:
    """SQuAD's normalize_answer, split into words."""
    text = text.lower().translate(_PUNCT)
    return _ARTICLES.sub(" ", text).split()


def f1(prediction: str, reference: str) -> float:
    got, want = normalize(prediction), normalize(reference)
    if not got or not want:
        return float(got == want)
    common = sum((Counter(got) & Counter(want)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)
