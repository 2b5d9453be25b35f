"""The preflight of `python -m sweep`: before Hydra runs anything, every combination on the
command line is composed and checked, so that a typo, an unknown option, a bad value, a key where
its variable's name belongs, an engine folder that cannot be written, a launcher setting joblib
refuses or an output folder on a full disk is one `error:` line and exit code 2, not a failure
hours into a sweep (or a secret in Hydra's `.hydra/` folder)."""

from __future__ import annotations

import errno
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from sweep.errors import InputError, bad_input, exit_2_on_bad_input, folder_problem, one_line
from sweep.experiment.command_line import composition_error, hydra_arguments_parser, joined_lines, sweep_combinations
from sweep.experiment.trial import build_pipeline, check_settings
from sweep.retrieval.model_client import check_base_url, check_key_variable

log = logging.getLogger("sweep")
BASIC_SWEEPER = ("basic", "preflighted")  # Hydra's basic sweeper, by its name and by its old one here
MAX_COMBINATIONS = 1000  # a larger -m sweep is refused: checking it alone would take minutes
NOTICE_FROM = 50  # from this many combinations, say that they are being checked (about 0.1 s each)
OUTPUT_ROOM = 64 * 1024  # bytes Hydra's output folder needs at least: .hydra/*.yaml and the job's log
KEY_VARIABLES = {"reranker": "RERANK_API_KEY"}  # each component's default api_key_env; OPENAI_API_KEY elsewhere
JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SECRETS: dict[str, Callable[[str, str], None]] = {  # settings whose value must not be written or shown
    "api_key_env": lambda key, value: check_key_variable(
        key, value, KEY_VARIABLES.get(key.partition(".")[0], "OPENAI_API_KEY")
    ),
    "base_url": lambda key, value: check_base_url(key, value, f"{key.rpartition('.')[0]}.api_key_env".lstrip(".")),
}


def chooses_its_combinations(override: Override) -> bool:
    """Whether `override` hands the sweep to a sweeper that chooses its own combinations (Optuna,
    ...): not Hydra's basic one, by its name or by its old one (`preflighted`)."""
    if override.get_key_element() == "hydra/sweeper":
        return override.value() not in BASIC_SWEEPER
    return override.get_key_element().startswith(("hydra/sweeper", "hydra.sweeper"))


@exit_2_on_bad_input
def preflight(argv: Sequence[str]) -> int:
    """Compose and check every combination the command line asks for, as Hydra will; how many."""
    args, _ = hydra_arguments_parser().parse_known_args(argv)
    refuse_secrets(args.overrides)  # before anything, --cfg and --help included, shows or writes one
    asks_something_else = args.help or args.hydra_help or args.version or args.info or args.cfg or args.shell_completion
    other_config = args.config_path or args.config_dir or args.config_name or args.experimental_rerun
    if asks_something_else or other_config:
        return 0
    parser = OverridesParser.create()
    for override in args.overrides:
        try:
            parser.parse_overrides([override])
        except HydraException as error:
            raise InputError(f"{override}: cannot be read as an override ({joined_lines(error)})") from None
    parsed = parser.parse_overrides(args.overrides)
    if args.multirun and any(chooses_its_combinations(o) for o in parsed):
        return 0  # another sweeper chooses the combinations; each is checked when it runs
    hydra_own = [override.input_line for override in parsed if override.is_hydra_override()]
    if args.multirun:  # as the sweeper launches each combination and Hydra composes its job: Hydra's own first
        swept = [o.input_line for o in parsed if o.is_hydra_override() and o.is_sweep_override()]
        if swept:
            raise InputError(f"{swept[0]}: Hydra's own settings (hydra.*) take one value in a sweep, not several")
        jobs = sweep_combinations([o for o in parsed if not o.is_hydra_override()])
        combinations = [[*hydra_own, *job] for job in jobs]
    else:
        jobs = combinations = [list(args.overrides)]
    if len(combinations) > MAX_COMBINATIONS:
        raise InputError(
            f"-m: {len(combinations):,} combinations; one sweep runs at most {MAX_COMBINATIONS:,} (each is an MLflow "
            "run, checked before the first starts): split it, or let a sweeper choose (hydra/sweeper=optuna)"
        )
    if len(combinations) >= NOTICE_FROM:
        print(f"checking the {len(combinations):,} combinations before the first runs ...", file=sys.stderr)
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        first = composed_with_hydra(combinations[0])  # also for the output folder and the launcher
        check_output_folder(first, args.multirun)
        if args.multirun:
            check_launcher(first)
        for number, (combination, job) in enumerate(zip(combinations, jobs)):
            where = f" (in the combination {' '.join(job)})" if len(combinations) > 1 else ""
            try:
                reuse = number == 0 and first is not None
                composed = first if reuse else compose("config", overrides=combination, return_hydra_config=True)
                cfg = without_hydra(composed)
                check_settings(cfg)
                if cfg.resume and not args.multirun:
                    raise InputError("resume=true resumes a sweep: add -m (a single run has nothing to resume)")
                build_pipeline(cfg)  # cheap (nothing loads yet), and it checks what spans settings
            except Exception as error:
                cause = bad_input(error)  # also when Hydra wraps what a constructor raised
                if cause is not None:
                    raise InputError(f"{cause}{where}") from None
                if isinstance(error, (HydraException, OmegaConfBaseException)):
                    raise InputError(composition_error(error, combination) + where) from None
                raise
    return len(combinations)


def composed_with_hydra(overrides: Sequence[str]) -> DictConfig | None:
    """`overrides` composed with Hydra's own config (`hydra.*`); None where they cannot be
    composed (the checks that follow say why)."""
    try:
        return compose("config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException):
        return None


def without_hydra(composed: DictConfig) -> DictConfig:
    """What `compose` gives for the same overrides: the config without Hydra's node."""
    cfg = composed.copy()
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def check_output_folder(composed: DictConfig | None, multirun: bool) -> None:
    """That Hydra can create its output folder (`hydra.run.dir`, `hydra.sweep.dir` with -m) and
    write its first files there: a folder that cannot be written (/proc, a read-only working
    folder) or a full disk is one line before anything runs, not Hydra's traceback. A temporary
    folder is made where it would go, `OUTPUT_ROOM` bytes written in it, and removed."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    if composed is None:
        return
    try:
        folder = Path(str(OmegaConf.select(composed, key))).absolute()
    except (HydraException, OmegaConfBaseException):
        return  # what cannot be composed or resolved here is reported by the checks that follow, or by Hydra
    problem = folder_problem(folder, room=OUTPUT_ROOM)
    if problem is None:
        return
    if problem.endswith((os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))):
        raise InputError(
            f"{key}={folder}: no space left for Hydra's output folder ({problem}); free some, "
            f"or give {key}=<a folder on a disk with room>"
        )
    raise InputError(
        f"{key}={folder}: Hydra cannot create its output folder there ({problem}); give {key}=<a writable folder>"
    )


def check_launcher(composed: DictConfig | None) -> None:
    """The launcher's settings, as joblib would take them when the sweep launches its first
    combination (a 34-line traceback then, after the sweep's run was opened): `n_jobs=0`, and what
    `joblib.Parallel` refuses when made (`prefer`, `require`, `batch_size`, `max_nbytes`)."""
    if composed is None:
        return
    try:
        launcher = OmegaConf.to_container(OmegaConf.select(composed, "hydra.launcher"), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError):
        return  # reported by the checks that follow, or by Hydra
    if not isinstance(launcher, dict) or launcher.get("_target_") != JOBLIB_LAUNCHER:
        return
    from joblib import Parallel

    settings = {name: value for name, value in launcher.items() if name != "_target_"}
    if settings.get("n_jobs") == 0:
        raise InputError(
            "hydra.launcher.n_jobs=0: joblib runs at least one combination at a time; give how many at once "
            "(hydra.launcher.n_jobs=2), or -1 for one per CPU core"
        )
    for name in ("pre_dispatch", "batch_size", "max_nbytes"):  # as the launcher hands them to joblib
        try:
            settings[name] = int(settings[name]) if settings.get(name) else settings.get(name)
        except ValueError:
            pass
    try:
        Parallel(**{**settings, "backend": "loky"})  # the backend the launcher always uses; nothing starts yet
    except (TypeError, ValueError) as error:
        raise InputError(f"hydra.launcher: joblib refuses these settings ({one_line(error)})") from None


def refuse_secrets(overrides: Sequence[str]) -> None:
    """A key given where its variable's name belongs (`model.embedder.api_key_env=sk-...`) or a
    `base_url` with credentials, under any component's key (`reranker.`, `judge.`, a hybrid's
    member, Optuna's search space): one line that does not show the value, before Hydra writes the
    command line to `.hydra/overrides.yaml` and MLflow logs it. A component made from a config file
    checks the same when it is made (`sweep.retrieval.model_client.ModelClient`)."""
    parser = OverridesParser.create()
    for text in overrides:
        key = text.partition("=")[0].lstrip("+~").strip()
        check = SECRETS.get(key.rpartition(".")[2].partition("@")[0])
        if check is None or "=" not in text:
            continue
        try:
            [override] = parser.parse_overrides([text])
        except HydraException:
            raise InputError(f"{key}: cannot be read as an override; the value is not shown") from None
        if override.is_sweep_override() and not override.is_discrete_sweep():
            continue  # an interval: numbers, no text to check
        values = override.sweep_string_iterator() if override.is_sweep_override() else [override.value()]
        for value in values:
            if value is not None:
                check(key, value)
