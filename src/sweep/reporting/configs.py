"""What tells a sweep's configurations apart, for the report: short labels and the settings that differ.

A child run's overrides (`model=bm25 model.k1=1.2 golden.path=golden.jsonl cache_dir=cache`)
repeat, in a sweep, the overrides the whole sweep shares, so each configuration is named by the
overrides that vary only, each key in its shortest form among them (`model=bm25 k1=1.2`:
`varying_label`), and the shared ones are named once. The report and the console label the
configurations so, and `python -m sweep` names a sweep's runs so (its shared overrides go to the
sweep's run), so that a name fits where the MLflow UI cuts it.

The settings that differ are the logged params (the resolved config, flattened) whose values are
not the same in every configuration, less what only repeats the labels or other settings:

- a value that is null, "None" or empty counts as not set, as a key the run lacks does;
- a setting one option brings with it (BM25's `model.k1` when `model=bm25`) differs only in being
  set or not: it is left out when it has the same value wherever it is set;
- a copy of another setting (`chunking.size` is `${chunk}`, `model.index` is `${index}`): a key with
  the same value as another one shown in every configuration that sets it; the override, then the
  key set in more configurations, then the shorter name, is kept;
- a class path `X._target_` where `X`, its config group's option, is shown.

An override that varies is always shown. Each run's MLflow params keep every value.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

import pandas as pd

from sweep.evaluation.leaderboard import SweepResults
from sweep.settings import override_key

# an override: unquoted characters and quoted runs (Hydra's quoting), until whitespace outside quotes;
# a lone quote is kept as a character rather than dropped
_OVERRIDE = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*"|['"])+""")
UNSET = ("", "None", "null")  # how a null or empty setting reads once logged as an MLflow param
TARGET = "._target_"


def split_overrides(line: str) -> list[str]:
    """`a=1 b='x y'` -> [`a=1`, `b='x y'`]: a run's overrides, as its label joins them with spaces."""
    return _OVERRIDE.findall(line)


def shared_overrides(configs: Mapping[str, str]) -> list[str]:
    """The overrides every configuration has, in the first one's order."""
    split = [split_overrides(line) for line in configs.values()]
    if len(split) < 2:
        return []
    return [o for o in split[0] if all(o in others for others in split[1:])]


def short_keys(keys: Collection[str]) -> dict[str, str]:
    """Each of `keys` -> its shortest dotted ending that no other of `keys` ends with
    (`model.weight` -> `weight`; `model.members.bm25.k1` beside `model.members.tfidf.k1` -> `bm25.k1`);
    a key that ends another one whole stays whole."""
    short = {}
    for key in keys:
        parts = key.split(".")
        endings = (".".join(parts[-n:]) for n in range(1, len(parts) + 1))
        unique = (e for e in endings if not any(o != key and (o == e or o.endswith(f".{e}")) for o in keys))
        short[key] = next(unique, key)
    return short


def varying_label(overrides: Sequence[str], shared: Collection[str], short: Mapping[str, str] | None = None) -> str:
    """`overrides` less the `shared` ones, in their order, each key as `short` has it (default:
    `short_keys` of the keys left): `["model=hybrid", "model.weight=0.3"]` less `model=hybrid` is
    `weight=0.3`. "" where none is left."""
    varying = [o for o in overrides if o not in shared]
    short = short_keys([override_key(o) for o in varying]) if short is None else short
    labels = []
    for override in varying:
        key, bare = override_key(override), override.lstrip("+~")
        labels.append(f"{override[: len(override) - len(bare)]}{short.get(key, key)}{bare[len(key) :]}")
    return " ".join(labels)


def config_labels(configs: Mapping[str, str]) -> dict[str, str]:
    """Run id -> its overrides less those every configuration shares, as `varying_label` writes
    them. The whole overrides where that leaves nothing (a sweep of one), the run id where there
    are none; a label two runs would share gets its run id, so every configuration can be told apart."""
    shared = set(shared_overrides(configs))
    short = short_keys(varying_override_keys(configs)) if len(configs) > 1 else {}  # one: its keys whole
    labels = {run_id: varying_label(split_overrides(line), shared, short) for run_id, line in configs.items()}
    labels = {run_id: label or configs[run_id] or run_id for run_id, label in labels.items()}
    repeated = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    return {run_id: f"{label} (run {run_id})" if label in repeated else label for run_id, label in labels.items()}


def varying_override_keys(configs: Mapping[str, str]) -> list[str]:
    """The keys of the overrides that vary, in the order the runs give them."""
    shared = set(shared_overrides(configs))
    keys = [override_key(o) for line in configs.values() for o in split_overrides(line) if o not in shared]
    return list(dict.fromkeys(keys))


def settings_that_differ(differing: pd.DataFrame, configs: Mapping[str, str]) -> pd.DataFrame:
    """`differing` (run id x key, the params whose values are not all the same) less the keys the
    module's rules leave out; the varying overrides first, then the others by name. Unset values are NaN."""
    frame = differing.astype(object).where(~differing.isin(UNSET) & differing.notna())
    overridden = [k for k in varying_override_keys(configs) if k in frame.columns]
    varies = [k for k in frame.columns if k in overridden or frame[k].dropna().nunique() > 1]
    kept = without_copies(frame[varies], overridden)
    kept = [k for k in kept if k in overridden or not (k.endswith(TARGET) and k[: -len(TARGET)] in kept)]
    return frame[[*(k for k in overridden if k in kept), *sorted(k for k in kept if k not in overridden)]]


def without_copies(frame: pd.DataFrame, preferred: Sequence[str]) -> list[str]:
    """The keys of `frame` less each one that has another kept key's value wherever it is set."""
    order = sorted(frame.columns, key=lambda k: (k not in preferred, -int(frame[k].notna().sum()), len(k), k))
    kept: list[str] = []
    for key in order:
        values = frame[key].dropna()
        if not any(frame.loc[values.index, other].eq(values).all() for other in kept):
            kept.append(key)
    return kept


def leaderboard_configs(results: SweepResults) -> dict[str, str]:
    """Run id -> the configuration's overrides, as its run is labelled (a sweep's leaderboard)."""
    return {run_id: str(config) for run_id, config in results.leaderboard["config"].items()}
