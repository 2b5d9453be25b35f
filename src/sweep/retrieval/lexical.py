"""Lexical retrievers over chunk texts: BM25 (bm25s) and TF-IDF cosine (scikit-learn).

They implement `Retriever` like the dense retriever does: (scores, chunk ids), best first,
id -1 past the last match. A chunk that shares no term with the query scores 0 and is
not a match, so a query with no overlap at all gets an empty result. Scoring is exhaustive,
so a restricted search is always exact. A corpus in which no chunk has a single term to index
(emoji, symbols, stop words only) is an `InputError`: a lexical model cannot search it.

BM25's defaults are those of MTEB's `baseline-bm25s` (bm25s's own BEIR baseline): bm25s's
tokenizer (lowercase words of 2+ characters), English stop words, PyStemmer's Snowball `english`
stemmer, `lucene` scoring with k1 1.5 and b 0.75 (bm25s's defaults, as `bm25s.BM25()` builds it).
Questions are tokenized exactly as the chunks are.

Words are what lies between spaces and punctuation, so a language written without spaces (Chinese,
Japanese, Thai) gives one "word" per clause, which no question repeats: nothing is found. Both
models warn when most questions share no term with any chunk (`prepare_queries`), and
`analyzer=char_ngrams` indexes each word's overlapping character n-grams instead (`ngram_range`,
unigrams and bigrams by default, as CJK search engines index such text): stop words, stemming and
TF-IDF's word n-grams (`ngram_max`) do not apply then.
"""

from __future__ import annotations

import logging
import re
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import numpy as np
import Stemmer

from sweep.errors import InputError
from sweep.retrieval.retriever import Retriever
from sweep.settings import OneOf, Range, checked

log = logging.getLogger(__name__)
BM25_METHODS = ("robertson", "atire", "bm25l", "bm25+", "lucene")
STEMMERS = tuple(Stemmer.algorithms())  # PyStemmer's Snowball stemmers: english, porter, french, ...
ANALYZERS = ("word", "char_ngrams")
CHAR_NGRAMS = [1, 2]  # character unigrams and bigrams (the default `ngram_range`; never changed in place)
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class NgramRange:
    """[min, max] n-gram sizes: two integers, 1 <= min <= max <= `high`."""

    high: int = 5

    def allows(self, value: Any) -> bool:
        return (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in value)
            and 1 <= value[0] <= value[1] <= self.high
        )

    def __str__(self) -> str:
        return f"of two n-gram sizes [min, max], 1 <= min <= max <= {self.high}, e.g. [1, 2]"


def char_ngrams(text: str, low: int = 1, high: int = 2) -> list[str]:
    """Every overlapping character n-gram of `low` to `high` characters of each word of `text`
    (a run of letters, digits or underscores, lowercased), word by word; a word shorter than `low`
    is kept whole. Chinese `年假有几天` gives 年 假 有 几 天 年假 假有 有几 几天 for [1, 2]."""
    grams: list[str] = []
    for word in WORD.findall(text.lower()):
        if len(word) < low:
            grams.append(word)
            continue
        for n in range(low, min(high, len(word)) + 1):
            grams.extend(word[i : i + n] for i in range(len(word) - n + 1))
    return grams


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best k per row of a (queries, chunks) score matrix: score descending, then id ascending."""
    k = min(k, scores.shape[1])
    ids = np.arange(scores.shape[1])
    order = np.lexsort((np.broadcast_to(ids, scores.shape), -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), order


def _matches(scores: np.ndarray, k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Best k per row of a dense (queries, chunks) score matrix among the allowed chunks; a chunk
    scoring 0 is no match (id -1)."""
    if allowed is not None:
        outside = np.ones(scores.shape[1], dtype=bool)
        outside[allowed] = False
        scores[:, outside] = 0
    top, ids = top_k(scores, k)
    return np.where(top > 0, top, -np.inf).astype(np.float32), np.where(top > 0, ids, -1)


class LexicalRetriever(Retriever):
    """Times its own build; subclasses index the texts in `_index`."""

    index_s: float = 0.0
    model_name: str  # as `model=` names it
    analyzer: str = "word"  # or "char_ngrams" (`ANALYZERS`)
    unmatched_questions: int | None = None  # of the last `prepare_queries`: questions sharing no term with a chunk

    def no_terms(self, n_chunks: int) -> InputError:
        """The error for chunks among which not one has a term to index."""
        return InputError(
            f"model={self.model_name}: none of the {n_chunks} chunks has a word it can index (only emoji, symbols, "
            "punctuation or stop words): a lexical model cannot search this corpus; use a dense one (model=minilm)"
        )

    def build(self, texts: Sequence[str]) -> None:
        start = time.perf_counter()
        self._index(texts)
        self.index_s = time.perf_counter() - start

    @abstractmethod
    def _index(self, texts: Sequence[str]) -> None:
        """Build the scorer over these texts."""

    @abstractmethod
    def unmatched(self, queries: Sequence[str]) -> int:
        """How many of `queries` share no term with any chunk: they can match nothing."""

    def prepare_queries(self, queries: Sequence[str]) -> None:
        """Warn when most questions share no term with any chunk: a lexical model then finds
        nothing for them, which is what a tokenizer that does not split the language looks like."""
        nothing = self.unmatched_questions = self.unmatched(queries)
        if queries and nothing > len(queries) / 2:
            hint = (
                "try model.analyzer=char_ngrams (model.members.<name>.analyzer in a hybrid)"
                if self.analyzer == "word"
                else "its character n-grams match nothing either: are the corpus and the questions in one language?"
            )
            log.warning(
                "model=%s (analyzer=%s): %d of %d questions share no term with any chunk, so it finds nothing for "
                "them: the tokenizer may not split this language (words are split at spaces and punctuation; Chinese, "
                "Japanese and Thai are written without spaces); %s; see docs/commands.md#warnings",
                self.model_name, self.analyzer, nothing, len(queries), hint,
            )  # fmt: skip

    def stats(self) -> dict[str, float]:
        """The index's build time, and how many questions shared no term with any chunk."""
        stats = {"time/index_s": self.index_s}
        if self.unmatched_questions is not None:
            stats["lexical/questions_unmatched"] = float(self.unmatched_questions)
        return stats


@checked("model")
class BM25Retriever(LexicalRetriever):
    """BM25 over the chunk texts (bm25s). `stemmer`: a PyStemmer Snowball stemmer (`english`,
    `porter`, `french`, ...; null: words as they are); `stopwords`: `en` drops bm25s's English
    stop words (null: none); `method`: bm25s's variant (`lucene`, `robertson`, `atire`, `bm25l`,
    `bm25+`); `k1`, `b`: term-frequency saturation and length normalisation; `delta`: the floor
    `bm25l` and `bm25+` add (the others ignore it). `analyzer`: `word` (bm25s's words, as above) or
    `char_ngrams` (each word's character n-grams of `ngram_range` sizes; no stop words, no
    stemming: for languages written without spaces). The defaults reproduce MTEB's `baseline-bm25s`."""

    model_name = "bm25"

    def __init__(
        self,
        k1: Annotated[float, Range(0)] = 1.5,
        b: Annotated[float, Range(0, 1)] = 0.75,
        method: Annotated[str, OneOf(BM25_METHODS)] = "lucene",
        stopwords: Annotated[str | None, OneOf(("en",))] = "en",
        stemmer: Annotated[str | None, OneOf(STEMMERS)] = "english",
        delta: Annotated[float, Range(0)] = 0.5,
        analyzer: Annotated[str, OneOf(ANALYZERS)] = "word",
        ngram_range: Annotated[list[int], NgramRange()] = CHAR_NGRAMS,
    ) -> None:
        self.k1, self.b, self.method, self.delta = k1, b, method, delta
        self.stopwords, self.stemmer = stopwords, stemmer
        self.analyzer, self.ngram_range = analyzer, tuple(ngram_range)

    def tokenize(self, texts: Sequence[str], return_ids: bool = True) -> Any:
        """bm25s's tokens of `texts`, stop words dropped and words stemmed as configured (or their
        character n-grams): the same for the chunks (`return_ids`: bm25s's Tokenized, for
        indexing) and the questions (lists of strings)."""
        import bm25s

        if self.analyzer == "char_ngrams":
            grams = [char_ngrams(text, *self.ngram_range) for text in texts]
            if not return_ids:
                return grams
            vocab: dict[str, int] = {}
            return bm25s.tokenization.Tokenized(
                ids=[[vocab.setdefault(gram, len(vocab)) for gram in text] for text in grams], vocab=vocab
            )
        stemmer = Stemmer.Stemmer(self.stemmer) if self.stemmer else None
        return bm25s.tokenize(
            list(texts), stopwords=self.stopwords, stemmer=stemmer, return_ids=return_ids, show_progress=False
        )

    def _index(self, texts: Sequence[str]) -> None:
        import bm25s

        self.n_chunks = len(texts)
        tokens = self.tokenize(texts)
        if not tokens.vocab:
            raise self.no_terms(len(texts))
        self.model = bm25s.BM25(k1=self.k1, b=self.b, delta=self.delta, method=self.method)
        self.model.index(tokens, show_progress=False)
        self.terms = set(tokens.vocab) - {""}

    def unmatched(self, queries: Sequence[str]) -> int:
        return sum(not self.terms.intersection(query) for query in self.tokenize(queries, return_ids=False))

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        tokens = self.tokenize(queries, return_ids=False)
        scores = np.zeros((len(tokens), self.n_chunks))
        for row, query in enumerate(tokens):
            if query:  # a question of stop words only has no tokens left: it matches nothing
                scores[row] = self.model.get_scores(query)
        return _matches(scores, k, allowed)


@checked("model")
class TfidfRetriever(LexicalRetriever):
    """TF-IDF cosine (scikit-learn). `analyzer`: `word` (scikit-learn's words of 2+ characters,
    word n-grams up to `ngram_max`, `stop_words` dropped) or `char_ngrams` (each word's character
    n-grams of `ngram_range` sizes, as BM25's; `ngram_max` and `stop_words` do not apply)."""

    model_name = "tfidf"

    def __init__(
        self,
        sublinear_tf: bool = True,
        ngram_max: Annotated[int, Range(1, 5)] = 1,
        stop_words: Annotated[str | None, OneOf(("english",))] = "english",
        analyzer: Annotated[str, OneOf(ANALYZERS)] = "word",
        ngram_range: Annotated[list[int], NgramRange()] = CHAR_NGRAMS,
    ) -> None:
        self.sublinear_tf, self.ngram_max, self.stop_words = sublinear_tf, ngram_max, stop_words
        self.analyzer, self.ngram_range = analyzer, tuple(ngram_range)

    def _index(self, texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        if self.analyzer == "char_ngrams":
            low, high = self.ngram_range
            self.vectorizer = TfidfVectorizer(
                sublinear_tf=self.sublinear_tf, analyzer=partial(char_ngrams, low=low, high=high)
            )
        else:
            self.vectorizer = TfidfVectorizer(
                sublinear_tf=self.sublinear_tf, ngram_range=(1, self.ngram_max), stop_words=self.stop_words
            )
        terms = self.vectorizer.build_analyzer()
        if not any(terms(text) for text in texts):
            raise self.no_terms(len(texts))
        self.matrix = self.vectorizer.fit_transform(list(texts))  # rows are unit length: dot = cosine

    def unmatched(self, queries: Sequence[str]) -> int:
        return int((self.vectorizer.transform(list(queries)).getnnz(axis=1) == 0).sum())

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        scores = (self.vectorizer.transform(list(queries)) @ self.matrix.T).toarray()
        return _matches(scores, k, allowed)
