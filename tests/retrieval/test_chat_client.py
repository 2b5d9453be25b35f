"""The chat-completions client (`sweep.retrieval.chat_client`, on the shared endpoint client)
against a real OpenAI-compatible chat server on 127.0.0.1 (`helpers/chat_server.py`, answers a
known function of the prompt): order, concurrency, retries, Retry-After, timeouts, tokens, cost,
the cost cap, the cache, JSON answers and a key that never leaks."""

from __future__ import annotations

import json
import logging

import pytest

from helpers.chat_server import MODEL_NAME, right_answer, word_tokens, wrong_answer
from helpers.model_servers import chat_server
from sweep.errors import InputError
from sweep.retrieval.chat_client import ChatClient, as_messages
from sweep.retrieval.model_client import Usage

KEY = "sk-chat-7c4e2a9b1d3f5e6a8b0c2d4e6f8a0b1c"  # a value that must never appear in anything written
PROMPTS = [f"grade passage number {i} about annual leave and expenses" for i in range(8)]
# US$ per token: 0.001 in, 0.002 out, so that costs read as token counts
PRICES = {"price_per_mtok": 1000.0, "output_price_per_mtok": 2000.0}

pytestmark = pytest.mark.slow  # every test here talks to a real server on 127.0.0.1 (started once)


@pytest.fixture(scope="module")
def server():
    with chat_server(KEY) as running:
        yield running


@pytest.fixture
def clean(server, monkeypatch):
    monkeypatch.setenv("SWEEP_CHAT_KEY", KEY)
    server.faults()
    yield server
    server.faults()


def client(server, **settings) -> ChatClient:
    defaults = {"model": MODEL_NAME, "base_url": server.base_url, "api_key_env": "SWEEP_CHAT_KEY", "timeout": 5}
    return ChatClient(**defaults | settings)


def expected(prompt: str, json_mode: bool = False) -> str:
    return right_answer(as_messages(prompt), json_mode)


def test_answers_come_back_in_the_prompts_order_with_their_tokens_and_cost(clean):
    # the first two are held three times as long: they are answered last, and still come first
    clean.faults(hold_s=0.1, hold_longer=PROMPTS[:2], wrong=[PROMPTS[5]])
    chat = client(clean, max_concurrency=4, max_tokens=10, **PRICES)
    answers = chat.complete_all(PROMPTS)
    planted = wrong_answer(as_messages(PROMPTS[5]), False)
    assert [a.text for a in answers] == [planted if i == 5 else expected(p) for i, p in enumerate(PROMPTS)]
    assert planted != expected(PROMPTS[5])  # the client hands back what the server said, never a guess
    for prompt, answer in zip(PROMPTS, answers):
        assert answer.usage == Usage(word_tokens(prompt), word_tokens(answer.text)) and not answer.cached
        assert answer.cost_usd == pytest.approx(
            0.001 * answer.usage.prompt_tokens + 0.002 * answer.usage.completion_tokens
        )
    stats = chat.stats()
    assert stats["chat/requests"] == len(PROMPTS) and stats["chat/retries"] == 0 and stats["chat/cached"] == 0
    assert stats["chat/prompt_tokens"] == sum(a.usage.prompt_tokens for a in answers)
    assert stats["chat/completion_tokens"] == sum(a.usage.completion_tokens for a in answers)
    assert stats["cost/chat_usd"] == pytest.approx(sum(a.cost_usd for a in answers))


def test_a_server_that_counts_no_tokens_gets_the_estimate(clean):
    clean.faults(no_usage=True)
    answer = client(clean, max_tokens=10).complete(PROMPTS[0])
    assert answer.text == expected(PROMPTS[0])
    assert answer.usage == Usage(-(-len(PROMPTS[0]) // 4) + 4, 10)  # characters / 4 and the message's 4; max_tokens


@pytest.mark.parametrize("limit", [1, 3])
def test_no_more_than_max_concurrency_requests_are_in_flight(clean, limit):
    clean.faults(hold_s=0.5)  # long beside a request's start, even on a busy machine
    prompts = PROMPTS[: 2 * limit]
    answers = client(clean, max_concurrency=limit).complete_all(prompts)
    assert [a.text for a in answers] == [expected(p) for p in prompts]
    assert clean.stats()["max_in_flight"] == limit


def test_429s_and_500s_are_retried_and_counted(clean):
    # tries 2 and 3 of every 4 fail: each of prompts 2, 4 and 6 needs two retries
    clean.faults(every=4, rate_limit=2, server_error=3, retry_after=0.1)
    before = clean.requests()
    chat = client(clean, max_concurrency=1, max_retries=3)
    answers = chat.complete_all(PROMPTS[:6])
    assert [a.text for a in answers] == [expected(p) for p in PROMPTS[:6]]
    assert chat.stats()["chat/retries"] == 6 and chat.stats()["chat/requests"] == 6
    assert clean.requests() - before == 12


def test_retry_after_is_honoured(clean):
    clean.faults(every=100, rate_limit=1, retry_after=2)
    chat = client(clean, max_retries=2)
    assert chat.complete(PROMPTS[0]).text == expected(PROMPTS[0])
    first, second = clean.stats()["arrivals"]
    assert 1.9 <= second - first < 5  # the client's own backoff for a first retry is under 0.5 s
    assert chat.stats()["chat/retries"] == 1


def test_a_rate_limit_that_outlasts_the_retries_names_the_setting(clean):
    clean.faults(every=1, rate_limit=1, retry_after=0.1)
    before = clean.requests()
    with pytest.raises(InputError, match=r"HTTP 429 after chat.max_retries=2 retries") as error:
        client(clean, max_retries=2).complete(PROMPTS[0])
    assert "\n" not in str(error.value) and clean.requests() - before == 3


@pytest.mark.parametrize(("settings", "named"), [("judge", "judge.timeout=0.5"), ("--", "--timeout=0.5")])
def test_an_answer_held_past_the_timeout_is_one_line_naming_the_setting(clean, settings, named):
    clean.faults(every=1, slow=1, slow_s=3)
    before = clean.requests()
    with pytest.raises(InputError, match=f"no answer within {named} s, 1 retries included") as error:
        client(clean, timeout=0.5, max_retries=1, settings=settings).complete(PROMPTS[0])
    assert "\n" not in str(error.value) and clean.requests() - before == 2


def test_the_cost_cap_refuses_a_batch_estimated_above_it_and_sends_nothing(clean):
    before = clean.requests()
    chat = client(clean, max_tokens=10, max_cost_usd=0.1, **PRICES)
    estimate = chat.estimate(PROMPTS)
    per_prompt = -(-len(PROMPTS[0]) // 4) + 4  # characters / 4 and the message's 4 tokens
    assert estimate.prompts == 8 and estimate.usage == Usage(8 * per_prompt, 8 * 10)
    assert estimate.cost_usd == pytest.approx(8 * (0.001 * per_prompt + 0.002 * 10))
    with pytest.raises(InputError) as error:
        chat.complete_all(PROMPTS)
    assert str(error.value).startswith(
        f"chat.max_cost_usd=0.1: 8 prompts not in the cache for {MODEL_NAME} is estimated at ${estimate.cost_usd:.4f}"
    )
    assert "nothing was sent" in str(error.value) and clean.requests() == before


def test_the_cost_cap_stops_before_the_request_that_would_pass_it(clean):
    chat = client(clean, max_tokens=10, max_cost_usd=0.1, **PRICES)
    before, answered = clean.requests(), 0
    with pytest.raises(InputError, match=r"chat.max_cost_usd=0.1: the next /chat/completions request") as error:
        for prompt in PROMPTS:
            chat.complete(prompt)
            answered += 1
    # each request is let through only while what was spent and its estimate fit under the cap
    estimate = 0.001 * (-(-len(PROMPTS[0]) // 4) + 4) + 0.002 * 10
    real = 0.001 * word_tokens(PROMPTS[0]) + 0.002 * word_tokens(expected(PROMPTS[0]))
    assert answered == int((0.1 - estimate) // real) + 1 == clean.requests() - before
    assert chat.stats()["cost/chat_usd"] == pytest.approx(real * answered) and real * answered <= 0.1
    assert "stopped before sending it" in str(error.value) and "\n" not in str(error.value)


def test_answers_that_cost_more_than_estimated_stop_the_run_and_are_kept(clean, tmp_path):
    clean.faults(usage_times=50)  # the server counts 50 times the tokens: the first answer passes the cap
    chat = client(clean, max_tokens=10, max_cost_usd=0.2, max_concurrency=1, cache_dir=str(tmp_path), **PRICES)
    real = 50 * (0.001 * word_tokens(PROMPTS[0]) + 0.002 * word_tokens(expected(PROMPTS[0])))
    with pytest.raises(
        InputError, match=rf"chat.max_cost_usd=0.2: the answers cost \${real:.4f} .* more than estimated"
    ):
        chat.complete_all(PROMPTS[:3])
    # this client's own count: the module's server also counts late answers to earlier tests' clients
    assert chat.stats()["chat/requests"] == 1 and len(list(tmp_path.glob("*.json"))) == 1


def test_a_second_run_from_the_cache_sends_nothing(clean, tmp_path):
    first = client(clean, cache_dir=str(tmp_path), **PRICES).complete_all(PROMPTS)
    before = clean.requests()
    again = client(clean, cache_dir=str(tmp_path), **PRICES)
    assert again.estimate(PROMPTS).prompts == 0
    second = again.complete_all(PROMPTS)
    assert clean.requests() == before
    assert [a.text for a in second] == [a.text for a in first] and all(a.cached and a.cost_usd == 0 for a in second)
    assert [a.usage for a in second] == [a.usage for a in first]  # the tokens the answer took when it was asked
    assert again.stats()["chat/cached"] == 8 and again.stats()["chat/requests"] == 0
    other = client(clean, cache_dir=str(tmp_path), temperature=0.5)  # another setting: another answer
    assert other.estimate(PROMPTS).prompts == 8
    assert not [p for p in tmp_path.iterdir() if KEY.encode() in p.read_bytes()]


def test_settings_reach_the_server(clean):
    client(clean, temperature=0.3, seed=7, max_tokens=33).complete([
        {"role": "system", "content": "You grade passages."},
        {"role": "user", "content": PROMPTS[0]},
    ])  # fmt: skip
    body = clean.stats()["last_body"]
    assert body["model"] == MODEL_NAME and body["messages"][0] == {"role": "system", "content": "You grade passages."}
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.3, 7, 33) and "response_format" not in body


def test_json_answers_are_asked_for_and_read(clean):
    chat = client(clean, json_answers=True)
    answer = chat.complete(PROMPTS[0])
    assert clean.stats()["last_body"]["response_format"] == {"type": "json_object"}
    assert answer.parsed() == json.loads(expected(PROMPTS[0], json_mode=True))
    clean.faults(prose=True)  # a model that answers prose where JSON was asked for: read as not JSON, never guessed
    prose = chat.complete(PROMPTS[1])
    assert prose.parsed() is None and prose.text == f"Sure! The digest is {expected(PROMPTS[1], json_mode=True)}"


def test_a_server_without_json_mode_is_asked_again_without_it(clean):
    clean.faults(refuse_json_mode=True)
    before = clean.requests()
    chat = client(clean, json_answers=True, max_concurrency=1)
    answers = chat.complete_all(PROMPTS[:3])
    assert [a.text for a in answers] == [expected(p) for p in PROMPTS[:3]]  # the plain answers
    assert clean.requests() - before == 4 and "response_format" not in clean.stats()["last_body"]


@pytest.mark.parametrize(
    ("faults", "settings", "message"),
    [
        ({"not_json": True}, {}, r"chat.base_url=http://127.0.0.1:\d+/v1: not a /chat/completions answer"),
        ({}, {"model": "no-such-model"}, r"chat.model=no-such-model: .* has no such model or no /chat/completions \(404\)"),
        ({}, {"api_key_env": "SWEEP_UNSET_KEY"}, r"chat.api_key_env=SWEEP_UNSET_KEY: the variable is not set \(401"),
        ({}, {"api_key_env": "SWEEP_WRONG_KEY"}, r"chat.api_key_env=SWEEP_WRONG_KEY: the variable holds a key the server refused"),
    ],
)  # fmt: skip
def test_a_bad_answer_is_one_line(clean, monkeypatch, faults, settings, message):
    monkeypatch.setenv("SWEEP_WRONG_KEY", "sk-wrong-0000000000000000")
    clean.faults(**faults)
    with pytest.raises(InputError, match=message) as error:
        client(clean, **settings).complete(PROMPTS[0])
    assert "\n" not in str(error.value) and KEY not in str(error.value) and "sk-wrong" not in str(error.value)


def test_the_key_is_in_no_message_and_no_log(clean, caplog):
    caplog.set_level(logging.DEBUG)  # the openai client's and httpx's debug logs too
    clean.faults(echo_key=True)  # a gateway that echoes the key back in its error
    with pytest.raises(InputError, match=r"chat.base_url=.*: HTTP 400 .* from key \*\*\*") as error:
        client(clean).complete(PROMPTS[0])
    clean.faults(every=2, rate_limit=1, retry_after=0.1)
    client(clean, max_concurrency=2).complete_all(PROMPTS[:4])
    assert KEY not in str(error.value) and caplog.text and KEY not in caplog.text


def test_a_prompt_that_is_not_chat_messages_is_one_line():
    with pytest.raises(InputError, match=r"chat prompt: message 2 needs a role \(system, user, assistant\)"):
        as_messages([{"role": "user", "content": "a"}, {"role": "judge", "content": "b"}])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"api_key_env": KEY},
            "chat.api_key_env: not an environment variable's name (it looks like a key itself: give the variable "
            "that holds it, e.g. OPENAI_API_KEY); the value is not shown",
        ),
        (
            {"api_key_env": KEY, "settings": "--"},
            "--api-key-env: not an environment variable's name (it looks like a key itself: give the variable "
            "that holds it, e.g. OPENAI_API_KEY); the value is not shown",
        ),
        (
            {"base_url": f"http://user:{KEY}@127.0.0.1:11434/v1", "settings": "judge"},
            "judge.base_url: the address carries credentials (http://***@127.0.0.1:11434/v1); give it without "
            "them, and the key in the environment variable judge.api_key_env names; the credentials are not shown",
        ),
    ],
)
def test_a_key_where_a_name_belongs_or_in_the_address_is_refused_without_showing_it(settings, message):
    with pytest.raises(InputError) as error:
        ChatClient(**{"model": MODEL_NAME} | settings)
    assert str(error.value) == message and KEY not in str(error.value)
