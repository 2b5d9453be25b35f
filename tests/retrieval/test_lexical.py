"""BM25 (bm25s) and TF-IDF (scikit-learn) retrievers on real text."""

from __future__ import annotations

import logging
import math
import re

import numpy as np
import pytest
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from helpers.commands import compose_config
from sweep.errors import InputError
from sweep.evaluation import score
from sweep.experiment.trial import build_pipeline, check_settings
from sweep.formats.documents import Corpus, Document
from sweep.formats.golden_set import GoldenSet, Question
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.lexical import BM25_METHODS, BM25Retriever, TfidfRetriever, char_ngrams
from sweep.retrieval.pipeline import Pipeline

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


# A small Chinese corpus: written without spaces, each clause is one "word" to a word tokenizer
CHINESE = {
    "annual-leave": "员工每年享有二十天带薪年假。未休完的年假最多可以结转五天到下一年。",
    "travel": "出差期间的酒店费用每晚不超过八百元。机票应在出发前两周预订，并保留发票用于报销。",
    "remote-work": "员工每周最多可以在家远程办公两天，需要提前告知直属经理。",
    "passwords": "公司电脑的密码必须每九十天更换一次，密码长度不少于十二个字符。",
    "parental-leave": "女员工享有一百五十八天产假，男员工享有十五天陪产假。",
    "equipment": "新员工入职时可以申领一台笔记本电脑和一个显示器，请在服务台提交申请。",
}
CHINESE_QUESTIONS = {
    "q1": ("每年有多少天年假？", "annual-leave"),
    "q2": ("出差住酒店每晚的上限是多少？", "travel"),
    "q3": ("一周可以在家办公几天？", "remote-work"),
    "q4": ("电脑密码多久要换一次？", "passwords"),
    "q5": ("陪产假有几天？", "parental-leave"),
    "q6": ("新员工怎么申领笔记本电脑？", "equipment"),
}
NOT_SPLIT = (
    "{model} (analyzer=word): 6 of 6 questions share no term with any chunk, so it finds nothing for them: the "
    "tokenizer may not split this language (words are split at spaces and punctuation; Chinese, Japanese and Thai "
    "are written without spaces); try model.analyzer=char_ngrams (model.members.<name>.analyzer in a hybrid); "
    "see docs/commands.md#warnings"
)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "sweep.retrieval.lexical"]


def chinese_kb() -> tuple[Corpus, GoldenSet]:
    corpus = Corpus(tuple(Document(doc_id, text) for doc_id, text in CHINESE.items()))
    golden = GoldenSet(tuple(Question(qid, text, {doc: 1}) for qid, (text, doc) in CHINESE_QUESTIONS.items()))
    return corpus, golden


def test_char_ngrams_are_each_word_s_overlapping_characters():
    assert char_ngrams("年假有几天？VPN") == [
        "年",
        "假",
        "有",
        "几",
        "天",
        "年假",
        "假有",
        "有几",
        "几天",
        "v",
        "p",
        "n",
        "vp",
        "pn",
    ]
    assert char_ngrams("年假，a", 2, 3) == ["年假", "a"]  # a word shorter than the smallest n-gram stays whole


@pytest.mark.parametrize("make", [BM25Retriever, TfidfRetriever])
def test_a_chinese_corpus_finds_nothing_and_says_why_then_char_ngrams_find_it(make, caplog):
    """Issue 49, item 12: nDCG@10 0 and no word of it before; the warning, then char n-grams."""
    corpus, golden = chinese_kb()
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.lexical"):
        words = Pipeline(TokenChunker(0), make()).retrieve(corpus, golden)
    assert score(golden, words.results).mean["ndcg_at_10"] == 0.0
    assert warnings_of(caplog) == [NOT_SPLIT.format(model=f"model={make.model_name}")]
    assert words.stats["lexical/questions_unmatched"] == 6.0  # the count, a metric of the run
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.lexical"):
        grams = Pipeline(TokenChunker(0), make(analyzer="char_ngrams")).retrieve(corpus, golden)
    assert score(golden, grams.results).mean["ndcg_at_10"] == 1.0  # each question's document first
    assert not warnings_of(caplog) and grams.stats["lexical/questions_unmatched"] == 0.0


def test_an_english_corpus_is_not_warned_about_and_char_ngrams_rank_it_too(caplog):
    for make in (BM25Retriever, TfidfRetriever):
        with caplog.at_level(logging.WARNING, logger="sweep.retrieval.lexical"):
            retriever = make()
            retriever.build(TEXTS)
            retriever.prepare_queries(["how many days of annual leave", "hotel cap in London", "zzz qqq"])
        assert not warnings_of(caplog)
        grams = make(analyzer="char_ngrams", ngram_range=[2, 3])
        grams.build(TEXTS)
        assert grams.search(["annual leave days", "hotel cap London"], 1)[1][:, 0].tolist() == [0, 2]


def test_the_analyzer_is_set_from_the_config_and_checked():
    cfg = compose_config("model=bm25", "model.analyzer=char_ngrams", "model.ngram_range=[1,3]")
    check_settings(cfg)
    retriever = build_pipeline(cfg).retriever
    assert (retriever.analyzer, retriever.ngram_range) == ("char_ngrams", (1, 3))
    hybrid = build_pipeline(
        compose_config("model=hybrid", "model@model.members.minilm=tfidf", "model.members.minilm.analyzer=char_ngrams")
    ).retriever
    assert hybrid.members["minilm"].analyzer == "char_ngrams" and hybrid.members["bm25"].analyzer == "word"
    for override, message in [
        ("model.analyzer=chars", "model.analyzer='chars': must be one of word, char_ngrams"),
        (
            "model.ngram_range=[3,1]",
            "model.ngram_range=[3, 1]: must be a list of two n-gram sizes [min, max], 1 <= min <= max <= 5, e.g. [1, 2]",
        ),
        ("model.ngram_range=[2]", "model.ngram_range=[2]: must be a list of two n-gram sizes"),
    ]:
        with pytest.raises(InputError, match=f"^{re.escape(message)}"):
            check_settings(compose_config("model=tfidf", override))
    with pytest.raises(InputError, match=re.escape("model.ngram_range=[0, 2]: must be a list of two n-gram sizes")):
        BM25Retriever(ngram_range=[0, 2])
