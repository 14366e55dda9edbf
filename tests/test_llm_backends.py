"""LLM backends: the OpenAI-compatible client against the in-process fake
server (retries, timeouts, failures, secrets), and the local transformers
backend on a tiny random Qwen2 model."""
from __future__ import annotations

import logging

import pytest
from spacy.util import registry

from fake_openai import FakeOpenAIServer, bad_body, malformed, slow, status, valid
from spacy_rhetoric.llm.base import LLMBackend
from spacy_rhetoric.llm.openai_compatible import OpenAICompatibleBackend

SECRET = "sk-test-5f2a9c1e-DO-NOT-LEAK"
ENV = "RHETORIC_TEST_API_KEY"
CONV = [[{"role": "user", "content": "写一个比喻句。"}]]


def make_backend(server, **kwargs) -> OpenAICompatibleBackend:
    kwargs.setdefault("api_key_env", ENV)
    kwargs.setdefault("timeout", 2.0)
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("backoff", 0.01)
    return OpenAICompatibleBackend(server.base_url, "fake-model", **kwargs)


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(ENV, SECRET)
    return SECRET


def test_registered_and_protocol():
    cfg = {
        "backend": {
            "@llm_backends": "spacy_rhetoric.OpenAICompatible.v1",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
            "api_key_env": ENV,
            "timeout": 5.0,
            "max_retries": 1,
        }
    }
    backend = registry.resolve(cfg)["backend"]
    assert isinstance(backend, OpenAICompatibleBackend)
    assert isinstance(backend, LLMBackend)
    assert backend.url == "http://127.0.0.1:9/v1/chat/completions"


def test_valid_answers_n_and_logprobs(api_key):
    answer = '{"generation": "月亮像一只小船。"}'
    with FakeOpenAIServer(default=valid(answer, logprobs=[-0.5, -0.25])) as srv:
        out = make_backend(srv, logprobs=True).chat(CONV * 2, n=3, temperature=0.7, max_new_tokens=20)
    assert [len(x) for x in out] == [3, 3]
    assert all(c.ok and c.text == answer for x in out for c in x)
    assert out[0][0].logprob == pytest.approx(-0.75) and out[0][0].n_tokens == 2
    body = srv.requests[0].body
    assert body["model"] == "fake-model" and body["n"] == 3 and body["max_tokens"] == 20
    assert body["messages"] == CONV[0] and body["temperature"] == 0.7
    assert srv.requests[0].headers["Authorization"] == f"Bearer {SECRET}"


def test_server_ignoring_n_is_asked_again():
    with FakeOpenAIServer(default=valid('{"generation": "x"}', ignore_n=True)) as srv:
        out = make_backend(srv, api_key_env=None).chat(CONV, n=3)
    assert len(out[0]) == 3 and all(c.ok for c in out[0])
    assert len(srv.requests) == 3
    assert "Authorization" not in srv.requests[0].headers


def test_429_then_success_is_retried(api_key):
    with FakeOpenAIServer([status(429, retry_after=0.05), status(503), valid('{"generation": "好"}')]) as srv:
        out = make_backend(srv).chat(CONV)
    c = out[0][0]
    assert c.ok and c.text == '{"generation": "好"}'
    assert c.meta["attempts"] == 3 and len(srv.requests) == 3
    # Retry-After was honoured: the second request came >= 0.05 s after the first.
    assert srv.requests[1].time - srv.requests[0].time >= 0.04


def test_persistent_5xx_is_reported_not_raised(api_key, caplog):
    with FakeOpenAIServer(default=status(500)) as srv:
        with caplog.at_level(logging.INFO):
            out = make_backend(srv, max_retries=2).chat(CONV, n=2)
    assert len(srv.requests) == 3  # 1 + max_retries
    assert [c.ok for c in out[0]] == [False, False]
    assert out[0][0].error.startswith("HTTP 500")
    assert "retrying" in caplog.text


def test_client_error_is_not_retried(api_key):
    with FakeOpenAIServer(default=status(400, body='{"error": "bad request"}')) as srv:
        out = make_backend(srv).chat(CONV)
    assert len(srv.requests) == 1 and "HTTP 400" in out[0][0].error


def test_timeout_then_success_and_persistent_timeout(api_key):
    with FakeOpenAIServer([slow(1.0), valid('{"generation": "快"}')]) as srv:
        out = make_backend(srv, timeout=0.3, max_retries=1).chat(CONV)
    assert out[0][0].ok and out[0][0].meta["attempts"] == 2
    with FakeOpenAIServer(default=slow(1.0)) as srv:
        out = make_backend(srv, timeout=0.2, max_retries=1).chat(CONV)
    assert not out[0][0].ok and out[0][0].error == "timeout after 0.2 s"


def test_malformed_http_body_is_a_failure(api_key):
    with FakeOpenAIServer(default=bad_body()) as srv:
        out = make_backend(srv).chat(CONV)
    assert "malformed response" in out[0][0].error
    assert len(srv.requests) == 1


def test_malformed_answer_text_is_passed_through(api_key):
    # The backend does not judge content; the prompt parser reports it.
    with FakeOpenAIServer(default=malformed("not json at all")) as srv:
        out = make_backend(srv).chat(CONV)
    assert out[0][0].ok and out[0][0].text == "not json at all"


def test_connection_refused_is_a_failure(api_key):
    with FakeOpenAIServer() as srv:
        url = srv.base_url
    backend = OpenAICompatibleBackend(url, "m", api_key_env=ENV, timeout=0.5, max_retries=1, backoff=0.01)
    out = backend.chat(CONV)
    assert out[0][0].error.startswith("connection error")


def test_concurrency_is_bounded(api_key):
    with FakeOpenAIServer(default=slow(0.15, '{"generation": "x"}')) as srv:
        out = make_backend(srv, concurrency=2).chat(CONV * 6)
    assert all(c.ok for x in out for c in x)
    assert srv.max_in_flight == 2


def test_api_key_never_in_errors_or_logs(api_key, caplog):
    # A server that echoes the Authorization header in its error body.
    echo = status(401, body=f'{{"error": "invalid key Bearer {SECRET}"}}')
    with FakeOpenAIServer(default=echo) as srv:
        backend = make_backend(srv)
        with caplog.at_level(logging.DEBUG):
            out = backend.chat(CONV)
    err = out[0][0].error
    assert "HTTP 401" in err and ENV in err
    assert SECRET not in err and "***" in err
    assert SECRET not in caplog.text
    assert SECRET not in repr(backend) and SECRET not in str(vars(backend))


def test_missing_key_warns_and_sends_no_auth(monkeypatch, caplog):
    monkeypatch.delenv(ENV, raising=False)
    with FakeOpenAIServer() as srv:
        with caplog.at_level(logging.WARNING):
            out = make_backend(srv).chat(CONV)
    assert out[0][0].ok
    assert "Authorization" not in srv.requests[0].headers
    assert ENV in caplog.text


def test_bad_arguments():
    with pytest.raises(ValueError):
        OpenAICompatibleBackend("", "m")
    with pytest.raises(ValueError):
        OpenAICompatibleBackend("http://x", "m", timeout=0)
    backend = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m")
    with pytest.raises(ValueError):
        backend.chat(CONV, n=0)
    assert backend.chat([]) == []


# -- local transformers backend (tiny random Qwen2) --------------------------
@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory, simile_dir, cmdag_dir):
    from tiny_llm import real_records, tiny_model

    return tiny_model(tmp_path_factory.mktemp("tiny") / "m", real_records(simile_dir, cmdag_dir))


def test_transformers_backend_registered_greedy_batched(tiny_path):
    from spacy_rhetoric.llm.prompts import rg_messages
    from spacy_rhetoric.llm.transformers_backend import TransformersBackend

    cfg = {"b": {"@llm_backends": "spacy_rhetoric.Transformers.v1", "model_path": str(tiny_path), "batch_size": 2}}
    backend = registry.resolve(cfg)["b"]
    assert isinstance(backend, TransformersBackend) and isinstance(backend, LLMBackend)
    convs = [rg_messages("metaphor", "月光", ["上文。"]), rg_messages("hyperbole", "山", []), rg_messages("personification", "花", [])]
    batched = backend.chat(convs, n=1, temperature=0.0, max_new_tokens=8)
    single = TransformersBackend(str(tiny_path), batch_size=1).chat(convs, n=1, temperature=0.0, max_new_tokens=8)
    assert [c[0].text for c in batched] == [c[0].text for c in single]  # left padding is harmless
    assert [c[0].logprob for c in batched] == pytest.approx([c[0].logprob for c in single], abs=1e-4)
    c = batched[0][0]
    assert c.n_tokens and c.logprob < 0 and c.meta["finish_reason"] in ("stop", "length")
    # Reported logprob equals a teacher-forced rescoring of the same tokens.
    if c.meta["finish_reason"] == "stop":
        assert backend.score(convs[:1], [c.text])[0][0] == pytest.approx(c.logprob, abs=1e-3)
    beams = backend.chat(convs[:1], n=3, temperature=0.0, max_new_tokens=8)[0]
    assert len(beams) == 3 and len({b.text for b in beams}) == 3
    sampled = backend.chat(convs[:1], n=2, temperature=1.0, max_new_tokens=8)[0]
    assert len(sampled) == 2 and all(s.logprob is not None for s in sampled)
    # n samples of one prompt share its cache (prefix caching); each reported logprob is still the
    # model's own log p of the sampled tokens, as a teacher-forced pass computes it
    prompt = "上文：今天。\n修辞：比喻\n本体：月光\n句子："
    ids = backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    checked = 0
    for s in backend.complete([prompt], n=4, temperature=1.0, max_new_tokens=8, stop="\n")[0]:
        cont = backend.tokenizer(s.text, add_special_tokens=False)["input_ids"]
        if len(cont) == s.n_tokens:
            assert backend._logprobs([ids], [cont])[0][0] == pytest.approx(s.logprob, abs=1e-3)
            checked += 1
    assert checked


def test_shared_prefix_gives_the_answers_of_full_prefills(tiny_path, monkeypatch):
    """Rows that share a prompt's beginning (a lead's prompts, a
    parallelism's branches) run it once and are padded in the middle; the
    sampled answers and their log-probabilities are those of a left-padded
    batch that runs every row whole."""
    from spacy_rhetoric.llm.transformers_backend import TransformersBackend, _left_pad

    base = "上文：今天下雨了。\n修辞：比喻\n本体：月光\n句子："
    prompts = [base + "月光像", base + "月光仿佛是一", base + "月光"]
    shared = TransformersBackend(str(tiny_path), seed=0)
    rows = [shared.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    ids, mask, cache = shared._shared_prefix(rows, 8)
    assert cache is not None and cache.get_seq_length() > 5
    assert ids.shape == (3, max(len(r) for r in rows)) and mask[:, : cache.get_seq_length()].all()
    assert [r[m.bool()].tolist() for r, m in zip(ids, mask)] == rows  # each row's own tokens, in order
    got = shared.complete(prompts, n=2, temperature=1.0, max_new_tokens=8, stop="\n")
    whole = TransformersBackend(str(tiny_path), seed=0)
    monkeypatch.setattr(whole, "_shared_prefix", lambda rows, _: (*_left_pad(rows, whole.tokenizer.pad_token_id, "cpu"), None))
    want = whole.complete(prompts, n=2, temperature=1.0, max_new_tokens=8, stop="\n")
    assert [[c.text for c in x] for x in got] == [[c.text for c in x] for x in want]
    assert [c.logprob for x in got for c in x] == pytest.approx([c.logprob for x in want for c in x], abs=1e-4)
    # middle padding that would reach past a sliding attention window: every row prefilled whole
    monkeypatch.setattr(shared.model.config, "sliding_window", len(rows[1]) + 4, raising=False)
    assert shared._shared_prefix(rows, 8)[2] is None
    assert shared._shared_prefix([rows[0], rows[0]], 8)[2] is not None  # no padding in the middle


def test_not_first_and_never_bar_texts_from_answers(tiny_path):
    """A text in ``not_first`` never begins an answer, greedy or sampled
    from a shared prompt cache (what keeps a parallelism's branch from
    being its marker alone); one in ``never`` is in no answer."""
    from spacy_rhetoric.llm.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_path), seed=0)
    prompt = "上文：今天。\n修辞：比喻\n本体：月光\n句子：月光"
    greedy = backend.complete([prompt], n=1, temperature=0.0, max_new_tokens=4, stop="\n")[0][0]
    first = greedy.text.lstrip()[:1]
    assert first
    barred = backend.complete([prompt], n=1, temperature=0.0, max_new_tokens=4, stop="\n", not_first=(first,))[0][0]
    assert barred.text.strip() and not barred.text.lstrip().startswith(first)
    sampled = backend.complete([prompt], n=6, temperature=1.0, max_new_tokens=4, stop="\n", not_first=(first,))[0]
    assert len(sampled) == 6 and not any(s.text.lstrip().startswith(first) or not s.text.strip() for s in sampled)
    # ``never``: in no token of the answer, at any step
    sampled = backend.complete([prompt], n=6, temperature=1.0, max_new_tokens=8, stop="\n", never=(first,))[0]
    assert len(sampled) == 6 and not any(first in s.text for s in sampled)


def test_transformers_backend_errors(tiny_path, tmp_path):
    from spacy_rhetoric.llm.transformers_backend import TransformersBackend, pick_device

    assert pick_device("auto") in ("cpu", "cuda") and pick_device("cpu") == "cpu"
    backend = TransformersBackend(str(tiny_path), max_input_tokens=20)
    out = backend.chat(CONV * 2, n=2)
    assert all(not c.ok and "prompt too long" in c.error for x in out for c in x)
    # a folder that does not exist names the command that builds the asset
    with pytest.raises(OSError, match=r"\[R019\].*spacy project run generator-model"):
        TransformersBackend(str(tmp_path / "missing")).chat(CONV)


def _leaks(text: str, secret: str, min_len: int = 8) -> bool:
    """True when any run of ``min_len`` or more characters of ``secret`` is in ``text``."""
    return any(secret[i:i + min_len] in text for i in range(len(secret) - min_len + 1))


@pytest.mark.parametrize("raw_key", [SECRET + "\n", " " + SECRET + "\r\n", SECRET + "\t"])
def test_key_with_surrounding_whitespace_is_stripped_and_never_leaks(monkeypatch, caplog, raw_key):
    # `$(cat keyfile)` keeps no newline, but `$'...\n'`, an env file or a
    # secrets manager can: the key is sent stripped, and no form of it
    # (raw, JSON-escaped, repr-escaped) survives in an error or a log line.
    import json

    monkeypatch.setenv(ENV, raw_key)
    echoed = f'{{"error": "invalid key Bearer {json.dumps(raw_key)[1:-1]} / {raw_key!r} / {raw_key}"}}'
    with FakeOpenAIServer(default=status(401, body=echoed)) as srv:
        with caplog.at_level(logging.DEBUG):
            out = make_backend(srv, max_retries=0).chat(CONV)
    assert srv.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    err = out[0][0].error
    assert "HTTP 401" in err and "***" in err
    assert not _leaks(err, SECRET) and not _leaks(caplog.text, SECRET)


def test_key_straddling_the_error_body_cut_never_leaks(api_key, caplog):
    # The body is cut to ERROR_BODY_CHARS for the message: redaction runs on
    # the whole body first, so a key across the cut leaves no prefix behind.
    from spacy_rhetoric.llm.openai_compatible import ERROR_BODY_CHARS

    for offset in (ERROR_BODY_CHARS - len(SECRET) + 1, ERROR_BODY_CHARS - 10, ERROR_BODY_CHARS - 1):
        body = "x" * offset + SECRET + "y" * 50
        with FakeOpenAIServer(default=status(400, body=body)) as srv:
            with caplog.at_level(logging.DEBUG):
                out = make_backend(srv, max_retries=0).chat(CONV)
        err = out[0][0].error
        assert "HTTP 400" in err
        assert not _leaks(err, SECRET, min_len=6), offset
    assert not _leaks(caplog.text, SECRET, min_len=6)


def test_redact_covers_every_form_of_a_secret():
    from spacy_rhetoric.llm.redaction import redact

    key = "sk-live-ABCDEF123456\n"
    for form in (key, key.strip(), repr(key)[1:-1], "sk-live-ABCDEF123456\\n", "sk-live-ABCDEF123456%0A"):
        assert "ABCDEF" not in redact(f"header: Bearer {form} end", [key])
    assert redact("nothing secret here", [key]) == "nothing secret here"
    assert redact("abc", ["", None, "ab"]) == "abc"  # empty and too-short values are ignored
