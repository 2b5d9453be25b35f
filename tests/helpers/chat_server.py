"""A real OpenAI-compatible chat-completions server for the tests: FastAPI and uvicorn on
127.0.0.1, its answers a known function of the prompt, with request counters and injectable faults.

    PYTHONPATH=tests python tests/helpers/chat_server.py --port 8124 [--key SECRET]

`POST /v1/chat/completions` answers as OpenAI does (`choices[0].message.content`, `finish_reason`,
`usage`): `right_answer(messages, json_mode)` (a digest of the last user message; a JSON object
when the request asks for `response_format={"type": "json_object"}`), its tokens counted as
`word_tokens` counts them. `GET /admin/stats` gives `requests` (every try), `answered`,
`max_in_flight` (the most requests it held at once), `arrivals` (each try's time, seconds) and
`last_body` (the last request's body). `POST /admin/faults` sets what goes wrong, counting tries
from that call (and starts `max_in_flight` and `arrivals` anew): `{"every": 4, "rate_limit": 2, "retry_after": 0.5, "server_error": 3, "slow": 1,
"slow_s": 3}` answers the 2nd try of every 4 with 429 and `Retry-After: 0.5` (default 1), the 3rd
with 500 and holds the 1st for 3 s; `{"hold_s": 0.3}` holds every answer, `{"hold_longer": [...]}`
three times as long for those last user messages; `{"wrong": [...]}` plants `wrong_answer` for
those messages; `{"prose": true}` answers text where JSON was asked for; `{"not_json": true}`
answers 200 with HTML; `{"no_usage": true}` leaves `usage` out; `{"usage_times": 50}` reports 50
times the tokens; `{"echo_key": true}` answers 400 with the Authorization header in its message (as
some gateways do); `{"refuse_json_mode": true}` answers 400 to a request with `response_format`.

As a relevance judge (`POST /admin/judge`, kept until set again): `{"labels": {pair_key(query,
passage): grade, ...}, "flip": 0.2, "seed": 7, "unknown": 0, "no_score": [query, ...],
"late_score": [query, ...]}` answers a grading prompt (UMBRELA's `Query: ...` / `Passage: ...`)
with `##final score: N`, N = `judged_grade(...)`: the label given for that exact (query, passage),
`unknown` for a pair it was given no label for, and a seeded `flip` share of labelled pairs
flipped (relevant -> 0, not relevant -> 2), so the expected agreement is known. A query in
`no_score` is answered without a final score, also when asked again; one in `late_score` only
when asked again.

As a question generator (`POST /admin/generate`, kept until set again): `{"plant": 0.4, "seed": 3,
"duplicate_of": QUESTION}` answers a JSON-mode generation prompt (`Title: ...` / `Passage:` then
the passage, as `prompts/generate.txt` ends) with `{"question", "evidence"}`: the evidence a
sentence of at least 12 words that occurs once in the passage, the question `What does <title>
say about <its 3 longest words>?` (`good_generation`). A seeded `plant` share of passages get a
planted bad answer instead (`planted(passage, settings)` says which): `not_in_passage` (the
evidence's words in reverse order), `copies_evidence` (the evidence as the question),
`duplicate` (the question `duplicate_of`) and `unfindable` (a question of made-up words that
BM25 cannot match). An unanswerable prompt (`Topics:` then `- title` lines) gets `{"question"}`,
a question on its first title that no document answers (`unanswerable_question`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import time

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from helpers.model_servers import positional_fault

MODEL_NAME = "chat-test"


def last_user_message(messages: list[dict]) -> str:
    return next(message["content"] for message in reversed(messages) if message["role"] == "user")


def right_answer(messages: list[dict], json_mode: bool) -> str:
    """The answer a prompt gets: a digest of its last user message (and its word count, in JSON)."""
    question = last_user_message(messages)
    digest = hashlib.sha256(question.encode()).hexdigest()[:12]
    return json.dumps({"digest": digest, "words": len(question.split())}) if json_mode else f"digest {digest}"


def wrong_answer(messages: list[dict], json_mode: bool) -> str:
    """A planted wrong answer: the digest of the message reversed."""
    return right_answer([{"role": "user", "content": last_user_message(messages)[::-1]}], json_mode)


def pair_key(query: str, passage: str) -> str:
    """How the judge's labels name a (query, passage) pair."""
    return hashlib.sha256(f"{query}\x00{passage}".encode()).hexdigest()[:16]


def flipped(key: str, seed: int, share: float) -> bool:
    """Whether the judge flips the pair `key`: a seeded draw, the same in the test and the server."""
    return int(hashlib.sha256(f"{seed}|{key}".encode()).hexdigest(), 16) % 1_000_000 < share * 1_000_000


def judged_grade(query: str, passage: str, judge: dict) -> int:
    """The grade the judge gives a pair (see the module's doc)."""
    key = pair_key(query, passage)
    if key not in judge.get("labels", {}):
        return judge.get("unknown", 0)
    grade = judge["labels"][key]
    if flipped(key, judge.get("seed", 0), judge.get("flip", 0.0)):
        return 0 if grade >= 1 else 2
    return grade


def judge_answer(messages: list[dict], judge: dict) -> str:
    """The judge's answer to a grading prompt, or to the reminder after an answer without a score."""
    prompt = next(message["content"] for message in messages if message["role"] == "user")
    query = prompt.partition("Query: ")[2].partition("\nPassage: ")[0]
    passage = prompt.partition("\nPassage: ")[2].rpartition("\n\nSplit this problem into steps:")[0]
    asked_again = sum(message["role"] == "user" for message in messages) > 1
    if query in judge.get("no_score", []) or (query in judge.get("late_score", []) and not asked_again):
        return "The passage looks related to the query."
    grade = judged_grade(query, passage, judge)
    return f"M: {grade}\nT: 2\n##final score: {grade}"


PLANTS = ("not_in_passage", "copies_evidence", "duplicate", "unfindable")
SYLLABLES = ("ba", "ke", "zu", "vo", "ri", "ta", "mo", "pl", "qu", "ex", "lo", "fi", "gr", "un", "sa", "dr")
FAR_AWAY = (
    "for staff posted to the Antarctic research station",
    "during a total solar eclipse",
    "for colleagues who work on board the company yacht",
)


def _draw(text: str, seed: int) -> int:
    return int(hashlib.sha256(f"{seed}|{text}".encode()).hexdigest(), 16)


def planted(passage: str, settings: dict) -> str | None:
    """The kind of bad answer the generator plants for `passage` (one of `PLANTS`), None for a
    good one: a seeded draw, the same in the test and the server."""
    draw = _draw(passage, settings.get("seed", 0))
    if draw % 1_000_000 >= settings.get("plant", 0.0) * 1_000_000:
        return None
    return PLANTS[(draw // 1_000_000) % len(PLANTS)]


def good_generation(title: str, passage: str) -> tuple[str, str]:
    """The question and the evidence a generator gives a passage when nothing is planted."""
    parts = [part.strip() for part in re.split(r"(?<=[.!?])\s+|\n+", passage)]
    sentences = [part for part in parts if len(part.split()) >= 12 and passage.count(part) == 1]
    evidence = (sentences or [max(parts, key=len)])[_draw(passage, 0) % max(len(sentences), 1)]
    words = sorted({word.lower() for word in re.findall(r"[A-Za-z]{5,}", evidence)}, key=lambda w: (-len(w), w))[:3]
    return f"What does {title} say about {', '.join(words)}?", evidence


def made_up_question(passage: str) -> str:
    """A question of made-up words (and stop words) that shares no term with any document."""
    draw = _draw(passage, 1)
    words = ["".join(SYLLABLES[(draw >> (4 * (i * 4 + j))) & 15] for j in range(3 + i % 2)) for i in range(4)]
    return f"Is the {words[0]} {words[1]} of the {words[2]} {words[3]}?"


def unanswerable_question(topics: list[str]) -> str:
    """A question on the first topic that no document answers."""
    return f"Is there guidance on {topics[0].lower()} {FAR_AWAY[_draw(topics[0], 0) % len(FAR_AWAY)]}?"


def generation_answer(messages: list[dict], settings: dict) -> str:
    """The generator's JSON answer to a generation prompt or an unanswerable one."""
    prompt = last_user_message(messages)
    if "\nTopics:\n" in prompt:
        topics = [line.removeprefix("- ") for line in prompt.partition("\nTopics:\n")[2].splitlines() if line]
        return json.dumps({"question": unanswerable_question(topics)})
    title, _, passage = prompt.partition("\nTitle: ")[2].partition("\nPassage:\n")
    passage = passage.removesuffix("\n")
    question, evidence = good_generation(title, passage)
    kind = planted(passage, settings)
    if kind == "not_in_passage":
        evidence = " ".join(reversed(evidence.split()))
    elif kind == "copies_evidence":
        question = evidence
    elif kind == "duplicate":
        question = settings["duplicate_of"]
    elif kind == "unfindable":
        question = made_up_question(passage)
    return json.dumps({"question": question, "evidence": evidence})


def word_tokens(text: str) -> int:
    """The server's token count: words."""
    return len(text.split())


def create_app(key: str | None = None) -> FastAPI:
    app = FastAPI()
    started = time.monotonic()
    state = {
        "faults_set": 0,
        "requests": 0,
        "answered": 0,
        "in_flight": 0,
        "max_in_flight": 0,
        "arrivals": [],
        "last_body": None,
    }
    faults: dict = {}
    judge: dict = {}
    generate: dict = {}

    @app.post("/admin/generate")
    async def set_generate(request: Request) -> dict:
        generate.clear()
        generate.update(await request.json())
        return generate

    @app.post("/admin/judge")
    async def set_judge(request: Request) -> dict:
        judge.clear()
        judge.update(await request.json())
        return {"labels": len(judge.get("labels", {}))}

    @app.get("/admin/stats")
    def stats() -> dict:
        return state

    @app.post("/admin/faults")
    async def set_faults(request: Request) -> dict:
        faults.clear()
        faults.update(await request.json())
        faults["since"] = state["requests"]
        # requests still held from before (a timed-out client's) are not counted in flight any more
        state["faults_set"] += 1
        state["in_flight"] = state["max_in_flight"] = 0
        state["arrivals"] = []
        return faults

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        state["requests"] += 1
        state["arrivals"].append(time.monotonic() - started)
        generation = state["faults_set"]
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            return await answer(request, state["requests"] - faults.get("since", 0))
        finally:
            if state["faults_set"] == generation:
                state["in_flight"] -= 1

    async def answer(request: Request, number: int):
        authorization = request.headers.get("authorization", "")
        body = await request.json()
        state["last_body"] = body
        if faults.get("echo_key"):
            message = f"malformed request from key {authorization.removeprefix('Bearer ')}"
            return JSONResponse({"error": {"message": message}}, status_code=400)
        if key is not None and authorization != f"Bearer {key}":
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        if body.get("model") != MODEL_NAME:
            return JSONResponse({"error": {"message": f"model {body.get('model')} not found"}}, status_code=404)
        json_mode = (body.get("response_format") or {}).get("type") == "json_object"
        if json_mode and faults.get("refuse_json_mode"):
            return JSONResponse({"error": {"message": "response_format is not supported"}}, status_code=400)
        fault = await positional_fault(faults, number)
        if fault is not None:
            return fault
        messages = body["messages"]
        longer = 3 if last_user_message(messages) in faults.get("hold_longer", []) else 1
        await asyncio.sleep(faults.get("hold_s", 0) * longer)
        if faults.get("not_json"):
            return PlainTextResponse("<html>gateway</html>", status_code=200, media_type="text/html")
        planted = last_user_message(messages) in faults.get("wrong", [])
        if judge and not json_mode:
            content = judge_answer(messages, judge)
        elif generate and json_mode:
            content = generation_answer(messages, generate)
        else:
            content = (wrong_answer if planted else right_answer)(messages, json_mode)
        if json_mode and faults.get("prose"):
            content = f"Sure! The digest is {content}"
        state["answered"] += 1
        times = faults.get("usage_times", 1)
        prompt = sum(word_tokens(message["content"]) for message in messages) * times
        completion = word_tokens(content) * times
        reply = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_NAME,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
        if not faults.get("no_usage"):
            reply["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return reply

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", default=None)
    arguments = parser.parse_args()
    uvicorn.run(create_app(arguments.key), host="127.0.0.1", port=arguments.port, log_level="warning")
