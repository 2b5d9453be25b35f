"""The wheel ships everything `python -m sweep` needs: pyproject.toml lists packages and data
files explicitly (conf/ and data/ ship as sweep.conf and sweep.data), so a new subpackage or a
config file one folder deeper must be listed, or an installed wheel fails where a checkout works.
And every package the code, the tests or the benchmarks import is declared, so that a fresh
virtual environment with the `[dev]` extra has it (a global install must not hide a missing one)."""

from __future__ import annotations

import ast
import glob
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from helpers.processes import installed

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
OURS = {"sweep", "helpers", "conftest"} | {path.stem for path in (ROOT / "bench").glob("*.py")}


def folder_of(package: str) -> Path:
    mapped = SETUPTOOLS["package-dir"]
    return ROOT / mapped[package] if package in mapped else ROOT / mapped[""] / package.replace(".", "/")


def test_every_package_in_the_source_tree_is_listed():
    source = ROOT / SETUPTOOLS["package-dir"][""]
    on_disk = {".".join(init.parent.relative_to(source).parts) for init in source.rglob("__init__.py")}
    assert on_disk <= set(SETUPTOOLS["packages"]), on_disk - set(SETUPTOOLS["packages"])


def test_every_config_and_data_file_matches_a_package_data_pattern():
    for package in ("sweep.conf", "sweep.data", "sweep.labelling"):
        folder = folder_of(package)
        shipped = {
            match for pattern in SETUPTOOLS["package-data"][package] for match in glob.glob(pattern, root_dir=folder)
        }
        files = {
            path.relative_to(folder).as_posix()
            for path in folder.rglob("*")
            if path.is_file() and path.suffix not in (".py", ".pyc")
        }
        assert files <= shipped, f"{package}: not shipped: {sorted(files - shipped)}"


def normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def imported_top_levels(path: Path) -> set[str]:
    """The top-level names a file imports, absolute imports only (relative ones are its own package's)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.partition(".")[0])
    return names


def test_every_imported_package_is_declared_in_pyproject():
    project = PYPROJECT["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    declared = {normalised(re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0]) for requirement in requirements}
    providers = metadata.packages_distributions()
    undeclared = {}
    for path in [*ROOT.glob("src/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/*.py")]:
        for name in imported_top_levels(path) - sys.stdlib_module_names - OURS:
            if not {normalised(d) for d in providers.get(name, ())} & declared:
                undeclared.setdefault(name, path.relative_to(ROOT).as_posix())
    assert not undeclared, f"imported but declared by no extra of pyproject.toml (name: first file): {undeclared}"


def test_the_forkservers_preload_leaves_out_what_is_not_installed():
    assert installed(["json.decoder", "no_such_package_for_golden_sweep.module", "yaml"]) == ["json.decoder", "yaml"]
