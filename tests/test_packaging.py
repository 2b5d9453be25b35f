"""The wheel ships everything `python -m sweep` needs: pyproject.toml lists packages and data
files explicitly (conf/ and data/ ship as sweep.conf and sweep.data), so a new subpackage or a
config file one folder deeper must be listed, or an installed wheel fails where a checkout works."""

from __future__ import annotations

import glob
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


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
