"""BM25 (bm25s) and TF-IDF (scikit-learn) retrievers on real text."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from sweep.errors import InputError
from sweep.retrieval.lexical import BM25_METHODS, BM25Retriever, TfidfRetriever

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
    assert retriever.stats()["time/index_s"] > 0


@pytest.mark.parametrize("make", [BM25Retriever, TfidfRetriever])
def test_k_larger_than_the_corpus_returns_only_the_matches(make):
    retriever = make()
    retriever.build(TEXTS)
    scores, ids = retriever.search(["leave"], 10)
    assert ids.shape == (1, 4) and sorted(ids[0][:2]) == [0, 3] and ids[0][2:].tolist() == [-1, -1]
    assert np.isfinite(scores[0][:2]).all() and np.isneginf(scores[0][2:]).all()


def test_bm25_scores_are_lucene_bm25():
    """score(q, d) = sum over query terms t of idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl)),
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)); terms are lowercase words of 2+ characters, less
    English stopwords (bm25s's tokenizer), Snowball-stemmed: the scores checked by hand, not by bm25s."""
    k1, b = 1.2, 0.6
    retriever = BM25Retriever(k1=k1, b=b)
    retriever.build(TEXTS)
    stop = set(STOPWORDS_EN)  # Lucene's 33 English stopwords
    stem = Stemmer.Stemmer("english").stemWord
    documents = [[stem(w) for w in re.findall(r"\b\w\w+\b", t.lower()) if w not in stop] for t in TEXTS]
    average = np.mean([len(d) for d in documents])

    def lucene(query: list[str], document: list[str]) -> float:
        total = 0.0
        for term in query:
            df = sum(term in d for d in documents)
            tf = document.count(term)
            idf = math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + k1 * (1 - b + b * len(document) / average))
        return total

    scores, ids = retriever.search(["annual leave days"], 4)
    expected = {i: lucene([stem(w) for w in ("annual", "leave", "days")], d) for i, d in enumerate(documents)}
    found = ids[0] >= 0
    assert {int(i) for i in ids[0][found]} == {i for i, s in expected.items() if s > 0}
    np.testing.assert_allclose(scores[0][found], [expected[int(i)] for i in ids[0][found]], rtol=1e-5)


def test_bm25_defaults_are_mteb_baseline_bm25s():
    """MTEB's `baseline-bm25s`: bm25s.tokenize(stopwords="en", stemmer=Stemmer("english")) and
    bm25s.BM25() (lucene, k1 1.5, b 0.75, delta 0.5)."""
    retriever = BM25Retriever()
    assert (retriever.stemmer, retriever.stopwords, retriever.method) == ("english", "en", "lucene")
    assert (retriever.k1, retriever.b, retriever.delta) == (1.5, 0.75, 0.5)


def test_questions_are_stemmed_as_the_chunks_are():
    texts = ["The runners were running the relays.", "A token for the VPN client."]
    stemmed, plain = BM25Retriever(), BM25Retriever(stemmer=None)
    for retriever in (stemmed, plain):
        retriever.build(texts)
    assert stemmed.tokenize(["runs relay"], return_ids=False) == [["run", "relay"]]
    assert stemmed.search(["runs relay"], 2)[1][0].tolist() == [0, -1]  # run(s)/running, relay(s)
    assert plain.search(["runs relay"], 2)[1][0].tolist() == [-1, -1]  # no word in common as written
    assert plain.search(["running relays"], 2)[1][0].tolist() == [0, -1]


def test_bm25_stopwords_null_keeps_every_word():
    texts = ["To be or not to be.", "Annual leave is 25 days."]
    with_stopwords, without = BM25Retriever(), BM25Retriever(stopwords=None)
    for retriever in (with_stopwords, without):
        retriever.build(texts)
    assert with_stopwords.search(["to be"], 2)[1][0].tolist() == [-1, -1]  # only stop words: nothing
    assert without.search(["to be"], 2)[1][0].tolist() == [0, -1]


@pytest.mark.parametrize("method", BM25_METHODS)
def test_every_bm25_method_ranks_the_matching_chunk_first(method):
    retriever = BM25Retriever(method=method)
    retriever.build(TEXTS)
    _, ids = retriever.search(["how many days of annual leave", "hotel cap in London"], 2)
    assert ids[0, 0] == 0 and ids[1, 0] == 2


def test_bm25_delta_moves_the_scores_of_bm25_plus_only():
    def top(method: str, delta: float) -> float:
        retriever = BM25Retriever(method=method, delta=delta)
        retriever.build(TEXTS)
        return float(retriever.search(["hotel cap"], 1)[0][0, 0])

    assert top("bm25+", 1.0) > top("bm25+", 0.5)
    assert top("lucene", 1.0) == top("lucene", 0.5)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"stemmer": "klingon"}, "model.stemmer='klingon': must be one of arabic, "),
        ({"stopwords": "english"}, "model.stopwords='english': must be one of en, or null"),
        ({"method": "bm42"}, "model.method='bm42': must be one of robertson, "),
        ({"delta": -1}, "model.delta=-1: must be a number >= 0"),
    ],
)
def test_bm25_settings_are_checked(setting, message):
    with pytest.raises(InputError, match=re.escape(message)):
        BM25Retriever(**setting)
