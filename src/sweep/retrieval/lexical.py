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
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import Stemmer

from sweep.errors import InputError
from sweep.retrieval.retriever import Retriever
from sweep.settings import OneOf, Range, checked

BM25_METHODS = ("robertson", "atire", "bm25l", "bm25+", "lucene")
STEMMERS = tuple(Stemmer.algorithms())  # PyStemmer's Snowball stemmers: english, porter, french, ...


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

    def stats(self) -> dict[str, float]:
        return {"time/index_s": self.index_s}


@checked("model")
class BM25Retriever(LexicalRetriever):
    """BM25 over the chunk texts (bm25s). `stemmer`: a PyStemmer Snowball stemmer (`english`,
    `porter`, `french`, ...; null: words as they are); `stopwords`: `en` drops bm25s's English
    stop words (null: none); `method`: bm25s's variant (`lucene`, `robertson`, `atire`, `bm25l`,
    `bm25+`); `k1`, `b`: term-frequency saturation and length normalisation; `delta`: the floor
    `bm25l` and `bm25+` add (the others ignore it). The defaults reproduce MTEB's `baseline-bm25s`."""

    model_name = "bm25"

    def __init__(
        self,
        k1: Annotated[float, Range(0)] = 1.5,
        b: Annotated[float, Range(0, 1)] = 0.75,
        method: Annotated[str, OneOf(BM25_METHODS)] = "lucene",
        stopwords: Annotated[str | None, OneOf(("en",))] = "en",
        stemmer: Annotated[str | None, OneOf(STEMMERS)] = "english",
        delta: Annotated[float, Range(0)] = 0.5,
    ) -> None:
        self.k1, self.b, self.method, self.delta = k1, b, method, delta
        self.stopwords, self.stemmer = stopwords, stemmer

    def tokenize(self, texts: Sequence[str], return_ids: bool = True) -> Any:
        """bm25s's tokens of `texts`, stop words dropped and words stemmed as configured: the same
        for the chunks (`return_ids`: bm25s's Tokenized, for indexing) and the questions (lists of
        strings)."""
        import bm25s

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
    model_name = "tfidf"

    def __init__(
        self,
        sublinear_tf: bool = True,
        ngram_max: Annotated[int, Range(1, 5)] = 1,
        stop_words: Annotated[str | None, OneOf(("english",))] = "english",
    ) -> None:
        self.sublinear_tf, self.ngram_max, self.stop_words = sublinear_tf, ngram_max, stop_words

    def _index(self, texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(
            sublinear_tf=self.sublinear_tf, ngram_range=(1, self.ngram_max), stop_words=self.stop_words
        )
        terms = self.vectorizer.build_analyzer()
        if not any(terms(text) for text in texts):
            raise self.no_terms(len(texts))
        self.matrix = self.vectorizer.fit_transform(list(texts))  # rows are unit length: dot = cosine

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        scores = (self.vectorizer.transform(list(queries)) @ self.matrix.T).toarray()
        return _matches(scores, k, allowed)
