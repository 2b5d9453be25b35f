"""Fixtures of the labelling app's tests: a golden set with a queue, the app serving it, and its test client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.labelling import Data, Server, start_server, write_label_data
from sweep.labelling.app import create_app
from sweep.labelling.golden_file import GoldenFile
from sweep.labelling.queue import load_queue


@pytest.fixture
def data(tmp_path, small_kb_files) -> Data:
    return write_label_data(tmp_path, small_kb_files)


@pytest.fixture
def server(data) -> Iterator[Server]:
    """`python -m sweep.label` on `data`, killed after the test."""
    running = start_server(data)
    try:
        yield running
    finally:
        running.kill()


@pytest.fixture
def client(data):
    """The app on `data` in this process (Flask's test client), grading as `tester`."""
    return create_app(GoldenFile(data.golden, data.corpus), load_queue(data.queue, data.corpus), "tester").test_client()
