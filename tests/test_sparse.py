"""BM25 (bm25s) and TF-IDF (scikit-learn) retrievers on real text."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.sparse import BM25Retriever, TfidfRetriever

TEXTS = [
    "Annual leave: employees in Leeds get 25 days of paid leave a year.",
    "The VPN client needs a hardware token; request one from the IT service desk.",
    "Hotel cap for business travel is 165 pounds a night in London.",
    "Parental leave is 20 weeks at full pay.",
]


@pytest.mark.parametrize("make", [BM25Retriever, TfidfRetriever])
def test_lexical_retrievers_rank_the_matching_chunk_first(make):
    retriever = make()
    retriever.build(TEXTS)
    scores, ids = retriever.search(["how many days of annual leave", "hotel cap in London", "zzz qqq"], 3)
    assert ids[0, 0] == 0 and ids[1, 0] == 2
    assert (ids[2] == -1).all() and np.isneginf(scores[2]).all()  # no shared term: nothing found
    matched = ids[0] >= 0
    assert (np.diff(scores[0][matched]) <= 0).all()
    assert ids[0, 1] in (3, -1)  # only the other "leave" chunk can follow


def test_k_larger_than_the_corpus():
    retriever = TfidfRetriever()
    retriever.build(TEXTS)
    assert retriever.search(["leave"], 10)[1].shape == (1, 4)
