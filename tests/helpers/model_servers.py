"""What the tests' model servers (`embedding_server.py`, `chat_server.py`) share: the faults they
inject by a try's position, and the tests' side: the environment they start in, waiting until one
answers and stopping it, and their admin routes (counts and faults)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parents[1]


def environment() -> dict[str, str]:
    """This process's environment with tests/ on PYTHONPATH: the servers import this module."""
    return os.environ | {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


def call(url: str, body: dict | None = None) -> dict:
    """A GET (or, with `body`, a JSON POST) to a test server, its JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:  # the embedding server encodes one request at a time
        return json.loads(answer.read())


class Server:
    """A test model server on 127.0.0.1: its OpenAI-style `base_url`, its counts, its faults."""

    def __init__(self, port: int) -> None:
        self.root = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root}/v1"

    def stats(self) -> dict:
        return call(f"{self.root}/admin/stats")

    def faults(self, **faults: Any) -> None:
        call(f"{self.root}/admin/faults", faults)


class ChatServer(Server):
    """`helpers/chat_server.py` started by a test: its tries so far, and its judge's settings."""

    def requests(self) -> int:
        return self.stats()["requests"]

    def judge(self, **settings: Any) -> None:
        call(f"{self.root}/admin/judge", settings)


@contextlib.contextmanager
def chat_server(key: str | None = None) -> Iterator[ChatServer]:
    """The tests' chat server on a free port of 127.0.0.1 (with `key`: it asks for that key)."""
    import subprocess
    import sys

    from helpers.servers import free_port

    port = free_port()
    arguments = [sys.executable, str(TESTS / "helpers" / "chat_server.py"), "--port", str(port)]
    arguments += ["--key", key] if key else []
    process = subprocess.Popen(arguments, env=environment(), stderr=subprocess.PIPE, text=True)
    with answering(process, ChatServer(port), timeout=60) as running:
        yield running


@contextlib.contextmanager
def answering(process: Any, server: Server, timeout: float) -> Iterator[Server]:
    """`server` once it answers (the test fails with what `process` printed if it does not within
    `timeout` seconds), and `process` stopped afterwards."""
    from helpers.servers import wait_until_answering  # the tests' side only: the servers run without it

    try:
        wait_until_answering(f"{server.root}/admin/stats", process, lambda: process.communicate()[1], timeout)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=20)


async def positional_fault(faults: dict, number: int) -> Any:
    """What the `number`th try since the faults were set gets, by its position in every `every`
    tries: a 429 with `Retry-After: retry_after` (default 1) at `rate_limit`, a 500 at
    `server_error`, or (at `slow`) a hold of `slow_s` seconds before it is answered as usual.
    None: answer as usual."""
    from fastapi.responses import JSONResponse  # the servers' own import; the tests' side needs none

    position = (number - 1) % faults["every"] + 1 if faults.get("every") else None
    if position is None:
        return None
    if position == faults.get("rate_limit"):
        headers = {"Retry-After": str(faults.get("retry_after", 1))}
        return JSONResponse({"error": {"message": "slow down"}}, status_code=429, headers=headers)
    if position == faults.get("server_error"):
        return JSONResponse({"error": {"message": "boom"}}, status_code=500)
    if position == faults.get("slow"):
        await asyncio.sleep(faults.get("slow_s", 3))  # only this request waits, not the server
    return None
