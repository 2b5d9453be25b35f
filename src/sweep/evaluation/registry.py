"""The metric registry: one declaration per metric a run logs, and the names built from them.

Each `Measure` declares, once: the logged name (a family such as `ndcg` takes a cutoff, written
`ndcg_at_10`), whether higher or lower is better, its display label, whether it is a cost (what a
configuration spends or gives up: latency, index size, embedding time, tokens delivered, the chunks its
model reads only the start of) and its formula
(`formula`; a rank metric's is the docstring of its numpy function in `measures`, so it is written
once). compare, check, the leaderboard, the console and HTML reports and `best` read it instead of
keeping their own lists. A name the registry does not declare is taken as higher-is-better.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sweep.errors import InputError
from sweep.evaluation import measures
from sweep.evaluation.measures import ABSTAIN_CORRECT, ABSTAIN_FALSE

CUTOFFS = ("required", "optional", "none")  # whether a name takes `_at_k`
UNITS = ("", "ms", "s", "bytes", "tokens", "share")
TRUNCATED = "corpus/truncated_share"  # a dense run's share of chunks its model truncates


@dataclass(frozen=True)
class Measure:
    """One metric's declaration (each field's type and default declared here, once)."""

    name: str  # the logged name; with a cutoff, `<name>_at_<k>`
    label: str  # for people: "nDCG", "latency p50 (ms)"
    formula: str  # what it measures, as a formula where there is one
    higher_is_better: bool = True
    cost: bool = False  # what a configuration spends or gives up (compared with --prefer, shown as cost columns)
    cutoff: str = "none"  # CUTOFFS
    unit: str = ""  # UNITS: how a cost is shown (bytes in a binary unit, a share as a percentage)
    short_label: str = ""  # the console's narrower column header, in lines; the label when empty
    function: Callable[..., np.ndarray] | None = None  # a rank metric's numpy function (`measures`)

    def __post_init__(self) -> None:
        if self.cutoff not in CUTOFFS or self.unit not in UNITS:
            raise ValueError(f"{self.name}: cutoff {self.cutoff!r} or unit {self.unit!r} is not declared")

    @property
    def lower_is_better(self) -> bool:
        return not self.higher_is_better

    @property
    def header(self) -> str:
        return self.short_label or self.label


def _rank(name: str, label: str, function: Callable[..., np.ndarray], cutoff: str) -> Measure:
    """A rank metric: its formula is its function's docstring (`measures`)."""
    return Measure(name, label, " ".join((function.__doc__ or "").split()), cutoff=cutoff, function=function)


MEASURES: tuple[Measure, ...] = (
    # ---- rank metrics (trec_eval's definitions; R: grade >= relevance_level)
    _rank("recall", "Recall", measures.recall, "required"),
    _rank("precision", "Precision", measures.precision, "required"),
    _rank("hit", "Hit rate", measures.hit, "required"),
    _rank("mrr", "MRR", measures.mrr, "optional"),
    _rank("ndcg", "nDCG", measures.ndcg, "optional"),
    _rank("map", "MAP", measures.average_precision, "optional"),
    _rank("r_precision", "R-precision", measures.r_precision, "none"),
    _rank("bpref", "bpref", measures.bpref, "none"),
    _rank("judged", "Judged", measures.judged, "required"),
    # ---- abstention: per question 1 for an empty result, averaged over a kind of question
    Measure(
        "abstain/correct_rate", "unanswerable abstaining", "share of the unanswerable questions with an empty result"
    ),
    Measure(
        "abstain/false_rate",
        "answerable abstaining",
        "share of the answerable questions with an empty result",
        higher_is_better=False,
    ),
    # ---- context: characters of a question's evidence E its top-k chunks R_1..R_k cover, C = ∪(R_i ∩ E)
    Measure("context/recall", "context recall", "|C| / |E|", cutoff="required"),
    Measure("context/precision", "context precision", "|C| / Σ|R_i|", cutoff="required"),
    Measure("context/iou", "context IoU", "|C| / (Σ|R_i| + |E| - |C|)", cutoff="required"),
    Measure("context/complete", "context complete", "1 if C = E else 0", cutoff="required"),
    Measure(
        "context/tokens",
        "tokens delivered",
        "Σ n_tokens(R_i): the reader's bill",
        higher_is_better=False,
        cost=True,
        cutoff="required",
        unit="tokens",
    ),
    Measure(
        "context/precision_omega",
        "context precision ceiling",
        "precision when exactly the chunks that hold evidence are delivered, each once",
    ),
    # ---- costs the pipeline measures (the leaderboard's cost columns, in this order)
    Measure(
        "latency/search_ms_p50",
        "latency p50 (ms)",
        "median over the timed questions (a sweep's, timed together at its end; up to 200 in a single run) of one "
        "question's whole path alone (encode, filter, search, rerank), in ms",
        higher_is_better=False,
        cost=True,
        unit="ms",
        short_label="p50\nms",
    ),
    Measure(
        "latency/search_ms_p95",
        "latency p95 (ms)",
        "95th percentile over the timed questions of one question's whole path alone, in milliseconds",
        higher_is_better=False,
        cost=True,
        unit="ms",
        short_label="p95\nms",
    ),
    Measure(
        "index/bytes",
        "index size",
        "bytes the index holds",
        higher_is_better=False,
        cost=True,
        unit="bytes",
        short_label="index\nMiB",
    ),
    Measure(
        "time/embed_s",
        "embedding (s)",
        "seconds spent embedding the corpus's chunks",
        higher_is_better=False,
        cost=True,
        unit="s",
        short_label="embed\ns",
    ),
    Measure(
        TRUNCATED,
        "chunks truncated",
        "share of the corpus's chunks longer than the embedding model's token limit (its special tokens "
        "included): the model reads only their start, and their end is never searched",
        higher_is_better=False,
        cost=True,
        unit="share",
        short_label="chunks\ntruncated",
    ),
)
BY_NAME: dict[str, Measure] = {m.name: m for m in MEASURES}

HEADLINE = "ndcg_at_10"  # what ranks questions, flips and sweeps unless told otherwise
LATENCY = "latency/search_ms_p50"  # the quality-versus-latency plot's axis
CHEAPEST_BY = LATENCY  # what `best --among tied` prefers the lowest of
ABSTAIN_METRICS = (ABSTAIN_CORRECT, ABSTAIN_FALSE)
# the costs a leaderboard shows as columns: the costs with a name of their own (not per cutoff)
COSTS = tuple(m.name for m in MEASURES if m.cost and m.cutoff == "none")
DEFAULT_METRICS = (
    "recall_at_1", "recall_at_3", "recall_at_5", "recall_at_10", "recall_at_20", "recall_at_100",
    "precision_at_1", "precision_at_5", "precision_at_10",
    "hit_at_1", "hit_at_5", "hit_at_10",
    "mrr", "mrr_at_10", "ndcg_at_5", "ndcg_at_10", "ndcg_at_20", "map", "map_at_10", "r_precision",
    "bpref", "judged_at_5", "judged_at_10", "judged_at_20",
)  # fmt: skip

_NAME = re.compile(r"(?P<family>[a-z_]+?)(?:_at_(?P<k>-?\d+))?")  # a rank metric's name
_LOGGED = re.compile(r"(?P<family>[a-z_/]+?)(?:_at_(?P<k>\d+))?")  # any declared name
# a per-type mean (`type/<type>/<metric>`) or a hybrid member's own value (`member/<name>/<metric>`)
_QUALIFIED = re.compile(r"(?:type|member)/[^/]+/(?P<metric>.+)")


def measure_of(name: str) -> Measure | None:
    """The declaration of a logged name (`ndcg_at_10`, `context/tokens_at_5`, `type/howto/mrr`,
    `member/bm25/mrr`),
    None for a name the registry does not declare."""
    qualified = _QUALIFIED.fullmatch(name)
    name = qualified["metric"] if qualified else name
    if name in BY_NAME:
        return BY_NAME[name]
    match = _LOGGED.fullmatch(name)
    declared = BY_NAME.get(match["family"]) if match and match["k"] is not None else None
    return declared if declared is not None and declared.cutoff != "none" else None


def lower_is_better(name: str) -> bool:
    """Whether less is better for `name` (abstaining on answerable questions, every cost)."""
    declared = measure_of(name)
    return declared is not None and declared.lower_is_better


def is_cost(name: str) -> bool:
    declared = measure_of(name)
    return declared is not None and declared.cost


def label(name: str) -> str:
    """For people: `nDCG@10`, `tokens delivered@5`, `latency p50 (ms)`; the name itself if undeclared."""
    declared = measure_of(name)
    if declared is None:
        return name
    match = _LOGGED.fullmatch(name)
    return (
        f"{declared.label}@{match['k']}"
        if match and match["k"] is not None and declared.cutoff != "none"
        else declared.label
    )


# ---------------------------------------------------------------- rank metric names


RANK_FAMILIES: dict[str, Measure] = {m.name: m for m in MEASURES if m.function is not None}


@dataclass(frozen=True)
class Family:
    function: Callable[..., np.ndarray]
    cutoff: str  # "required", "optional" or "none"


FAMILIES: dict[str, Family] = {name: Family(m.function, m.cutoff) for name, m in RANK_FAMILIES.items()}


def valid_names() -> str:
    forms = []
    for name, family in FAMILIES.items():
        forms += {"required": [f"{name}_at_K"], "optional": [name, f"{name}_at_K"], "none": [name]}[family.cutoff]
    return ", ".join(forms)


@dataclass(frozen=True)
class Metric:
    """A parsed rank metric name such as `ndcg_at_10` (family ndcg, k 10) or `mrr` (k None)."""

    family: str
    k: int | None

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}_at_{self.k}"

    def __call__(self, ranked: measures.RankedJudgments) -> np.ndarray:
        return FAMILIES[self.family].function(ranked, self.k)

    @classmethod
    def parse(cls, name: str) -> Metric:
        match = _NAME.fullmatch(name.strip())
        family = FAMILIES.get(match["family"]) if match else None
        if family is None:
            raise InputError(f"unknown metric {name!r}; valid metrics: {valid_names()}")
        k = None if match["k"] is None else int(match["k"])
        if k is None and family.cutoff == "required":
            raise InputError(f"metric {name!r} needs a cutoff, e.g. {match['family']}_at_10")
        if k is not None and family.cutoff == "none":
            raise InputError(f"metric {name!r} takes no cutoff; use {match['family']}")
        if k is not None and k <= 0:
            raise InputError(f"metric {name!r}: k must be a positive integer, got {k}")
        return cls(match["family"], k)


def parse_metrics(names: list[str]) -> list[Metric]:
    """Each name checked; order kept, repeats dropped."""
    if not names:
        raise InputError("no metrics given")
    return list(dict.fromkeys(Metric.parse(n) for n in names))


def select_metrics(metrics: str | Sequence[str] | None, has_unanswerable: bool) -> tuple[list[Metric], tuple[str, ...]]:
    """(rank metrics, abstention rates) for `metrics`: names such as "ndcg_at_10,mrr" (abstention
    rates included by name); None means DEFAULT_METRICS plus the abstention rates that apply."""
    if metrics is None:
        names = [*DEFAULT_METRICS, *(ABSTAIN_METRICS if has_unanswerable else (ABSTAIN_FALSE,))]
    else:
        names = [n.strip() for n in (metrics.split(",") if isinstance(metrics, str) else metrics) if n.strip()]
    abstain = tuple(n for n in dict.fromkeys(names) if n in ABSTAIN_METRICS)
    rank_names = [n for n in names if n not in ABSTAIN_METRICS]
    return (parse_metrics(rank_names) if rank_names or not abstain else []), abstain


def metric_values(
    ranked: measures.RankedJudgments, metrics: Sequence[Metric], answerable: np.ndarray
) -> dict[str, np.ndarray]:
    """Each metric per question; NaN for unanswerable questions, which abstention scores instead."""
    return {metric.name: np.where(answerable, metric(ranked), np.nan) for metric in metrics}
