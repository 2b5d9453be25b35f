"""The fixture the tracking tests share: a blank store in tmp_path as the tracking store."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest

from helpers.store_folders import tracking_in
from helpers.stores import copy_blank_store


@pytest.fixture
def tracking(tmp_path, monkeypatch) -> Path:
    """tmp_path the working folder, a blank store there (MLflow's, copied) the tracking store,
    outside any sweep."""
    copy_blank_store(tmp_path)
    tracking_in(tmp_path, monkeypatch)
    yield tmp_path
    mlflow.set_tracking_uri(None)
