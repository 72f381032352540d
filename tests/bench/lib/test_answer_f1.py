"""SQuAD-style token F1: normalization, partial overlap, empty answers."""

from __future__ import annotations

import pytest

from bench.lib.answer_f1 import f1, normalize


def test_normalization_drops_case_punctuation_and_articles():
    assert normalize("The Saturn V, an  old rocket!") == ["saturn", "v", "old", "rocket"]


def test_the_same_words_score_one_whatever_their_punctuation():
    assert f1("Cats sleep 16 hours.", "cats sleep 16 hours") == 1.0


def test_a_partial_overlap_is_the_harmonic_mean_of_precision_and_recall():
    precision, recall = 2 / 4, 2 / 3  # 2 common words
    want = 2 * precision * recall / (precision + recall)
    assert f1("cats sleep all day", "cats sleep lightly") == pytest.approx(want)


def test_repeated_words_count_once_per_occurrence_in_both():
    assert f1("yes yes yes", "yes") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))


def test_no_common_word_scores_zero_and_two_empty_answers_agree():
    assert f1("volcano", "rocket") == 0.0
    assert f1("", "rocket") == 0.0
    assert f1("the", "") == 1.0  # both empty once normalized
