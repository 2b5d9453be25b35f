"""`python -m sweep`'s command line as Hydra reads it, for the preflight to compose what Hydra
will: its options (those of `hydra.main`'s parser) and, with `-m`, the combinations Hydra's basic
sweeper launches (and the overrides they all share, which a sweep's run names leave out); and what
Hydra says of a command line it cannot compose, in one line. Built on Hydra's public override
parser; Hydra keeps its own versions of both in `hydra._internal`, which the tests hold these to."""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Sequence

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import MissingConfigException
from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError
from sweep.settings import override_key, unknown_key
from sweep.tracking.legacy import HYBRID_RERANKER_REMOVED


def hydra_arguments_parser() -> argparse.ArgumentParser:
    """A parser of the options `hydra.main` takes (Hydra 1.3), which reads a command line as
    Hydra does: an option that takes a value takes the same argument here, not an override."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("overrides", nargs="*")
    for flag in ["--help -h", "--hydra-help", "--version", "--resolve", "--run -r", "--multirun -m"]:
        parser.add_argument(*flag.split(), action="store_true")
    parser.add_argument("--shell-completion", "-sc", action="store_true")
    for option in ["--cfg -c", "--package -p", "--config-path -cp", "--config-name -cn", "--config-dir -cd"]:
        parser.add_argument(*option.split())
    parser.add_argument("--experimental-rerun")
    parser.add_argument("--info", "-i", nargs="?", const="all")
    return parser


def sweep_combinations(overrides: Sequence[Override]) -> list[list[str]]:
    """Every combination of `overrides` (a sweep's, Hydra's own left out) in the order Hydra's
    basic sweeper launches them: the product of each key's values, the keys in the order first
    given (a key given again takes the later values, in the first one's place)."""
    values: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [as_given_to_jobs(override)]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise InputError(
                f"{override.input_line}: Hydra's basic sweeper takes lists, range() and glob(), not intervals; "
                "hydra/sweeper=optuna samples an interval"
            )
    return [list(combination) for combination in itertools.product(*values.values())]


def as_given_to_jobs(override: Override) -> str:
    """An override with one value as a sweeper hands it to each job: `key=value`."""
    return f"{override.get_key_element()}={override.get_value_element_as_str()}"


def split_sweep(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """A sweep's command line (Hydra's own overrides left out) as the overrides that vary, as
    given, and those every combination shares, as each job gets them (`as_given_to_jobs`)."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    varying = [o.input_line for o in parsed if o.is_sweep_override()]
    return varying, [as_given_to_jobs(o) for o in parsed if not o.is_sweep_override()]


def composition_error(error: Exception, overrides: Sequence[str]) -> str:
    """Hydra's several-line composition errors as one line."""
    if isinstance(error, MissingConfigException) and error.missing_cfg_file and error.options is not None:
        if error.missing_cfg_file == "reranker/hybrid":  # an option that was removed says what does its job now
            return HYBRID_RERANKER_REMOVED
        group, _, option = error.missing_cfg_file.rpartition("/")
        hint = "; pip install 'golden-sweep[scale]' for joblib and ray" if group == "hydra/launcher" else ""
        return f"{group}={option}: no such option (the options: {', '.join(error.options)}){hint}"
    unknown = re.match(r"Could not override '(.+?)'", str(error))
    if unknown:
        key = unknown.group(1)
        parent = key.rpartition(".")[0]
        others = [o for o in overrides if override_key(o) != key]
        base = compose("config", overrides=others)
        node = OmegaConf.select(base, parent) if parent else base
        known = [str(k) for k in node.keys() if not str(k).startswith("_")] if isinstance(node, DictConfig) else []
        return f"{unknown_key(key, known)}; to add a key of your own: +{key}=..."
    return joined_lines(error)


def joined_lines(error: Exception) -> str:
    """A several-line Hydra message on one line, without its debugging lines."""
    lines = [line.strip() for line in str(error).splitlines()]
    return "; ".join(
        line for line in lines if line and not line.startswith(("full_key:", "object_type=", "See https://"))
    )
