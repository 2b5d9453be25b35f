"""The labelling app under test: a golden set with a queue, `python -m sweep.label` as a real process, and waiting on a browser."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import processes
from helpers.servers import free_port, wait_until_answering
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import GoldenSet, load_golden

POOLED = "a001"  # the question whose candidates the queue holds
START_TIMEOUT = 60


@dataclass(frozen=True)
class Data:
    folder: Path
    golden: Path
    corpus_path: Path
    queue: Path
    corpus: Corpus
    pooled: list[str]  # POOLED's candidates, in queue order

    def load(self) -> GoldenSet:
        return load_golden(self.golden, self.corpus, warn=False)


def write_label_data(folder: Path, kb_files: Path) -> Data:
    """In `folder`: a copy of the golden set of `kb_files` (a knowledge-base slice) and a queue of
    four unjudged documents for POOLED, each with a chunk (its second paragraph) as `sweep.pool`
    writes it."""
    golden = folder / "golden.jsonl"
    shutil.copyfile(kb_files / "golden.jsonl", golden)
    corpus = load_corpus(kb_files / "corpus.jsonl")
    judged = load_golden(golden, corpus, warn=False).by_id[POOLED].relevant
    pooled = [d.id for d in corpus if d.id not in judged][:4]
    candidates = []
    for rank, doc in enumerate(pooled, start=1):
        content = corpus.by_id[doc].content
        start = content.index("\n\n") + 2
        end = content.index("\n\n", start) if "\n\n" in content[start:] else len(content)
        chunk = {"run": "r1", "start": start, "end": end, "score": 1.0 / rank, "text": content[start:end]}
        candidates.append({"doc": doc, "title": "", "best_rank": rank, "ranks": {"r1": rank}, "chunk": chunk})
    header = {"pool": {"runs": [{"run_id": "r1", "name": "bm25", "overrides": "model=bm25"}], "depth": 10}}
    header["pool"] |= {"corpus": str(kb_files / "corpus.jsonl"), "corpus_ids": "path"}
    question = {"qid": POOLED, "question": "…", "type": "factoid", "candidates": candidates}
    queue = folder / "queue.jsonl"
    queue.write_text(json.dumps(header) + "\n" + json.dumps(question) + "\n")
    return Data(folder, golden, kb_files / "corpus.jsonl", queue, corpus, pooled)


@dataclass
class Server:
    process: processes.Started
    url: str

    def kill(self) -> None:
        """SIGKILL, unless it has ended; then reaped, and the files that held its output removed."""
        self.process.send_signal(signal.SIGKILL)
        self.process.communicate(timeout=30)


def start_server(data: Data) -> Server:
    """`python -m sweep.label` on a free port of 127.0.0.1, answering; forked from the tests'
    preloaded server (helpers.processes), which spares each start its imports (pandas: 1.5 s)."""
    port = free_port()
    process = processes.start(
        [sys.executable, "-m", "sweep.label", str(data.golden), "--pool", str(data.queue), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    wait_until_answering(url, process, lambda: "".join(process.communicate()), START_TIMEOUT)
    return Server(process, url)


def wait_for(condition, timeout: float = 20, what: str = "condition"):
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except StaleElementReferenceException:  # the page re-rendered what was being read: read again
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def saved(driver) -> bool:
    return driver.execute_script("return document.getElementById('save-status').textContent").startswith(
        "all changes saved"
    )


def change(client, path: str, qid: str = POOLED, **body):
    """POST `body` to question `qid`'s `path` through a Flask test client, on the question's saved version."""
    body["version"] = client.get(f"/api/questions/{qid}").get_json()["question"]["version"]
    return client.post(f"/api/questions/{qid}{path}", json=body)
