"""``rhetoric serve`` against a careless or hostile client: body, request
and record limits, bad Unicode and numbers, slow clients, the access token,
the rate limit, security headers, a generator that is not ready or whose
server is down. A blank Chinese pipeline with a sentencizer stands in for
the trained one (what is under test is the service, not the analysis)."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import spacy

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'spacy-rhetoric[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from spacy_rhetoric.analysis import render  # noqa: E402
from spacy_rhetoric.serve import app as serve_app  # noqa: E402
from spacy_rhetoric.serve import create_app  # noqa: E402
from spacy_rhetoric.serve.limits import PAGE_CSP, TokenBuckets  # noqa: E402
from test_serve import write_generator_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "class-7b-0123456789"
TOKEN_ENV = "RHETORIC_SERVE_TEST_ACCESS"


@pytest.fixture(scope="module")
def nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("sentencizer")
    return nlp


@pytest.fixture(scope="module")
def client(nlp):
    return TestClient(create_app(nlp, max_chars=1000, rate_limit=0))


def post_raw(client: TestClient, path: str, body: bytes):
    return client.post(path, content=body, headers={"Content-Type": "application/json"})


# --- the request body (streamed, chunked) -------------------------------------------------


def call_asgi(app: Any, scope: Dict[str, Any], chunks: List[bytes]) -> Dict[str, Any]:
    """Run one request through the ASGI app; ``chunks`` are handed out one per
    ``receive``. Returns the status, the JSON body and the chunks read."""
    read = 0
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        nonlocal read
        if read < len(chunks):
            read += 1
            return {"type": "http.request", "body": chunks[read - 1], "more_body": read < len(chunks)}
        await asyncio.sleep(3600)  # the client has nothing more to say
        return {"type": "http.disconnect"}

    async def send(message: Dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return {"status": start["status"], "json": json.loads(body), "read": read,
            "headers": {k.decode().lower(): v.decode() for k, v in start["headers"]}}


def test_a_chunked_body_is_refused_once_it_passes_the_limit(nlp):
    app = create_app(nlp, max_chars=1000, rate_limit=0)
    limit = 24 * 1000 + (1 << 20)
    chunk = b"x" * 65536
    chunks = [b'{"text": "'] + [chunk] * (4 * limit // len(chunk))  # four times the limit, no Content-Length
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/analyze", "raw_path": b"/analyze", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080)}
    answer = call_asgi(app, scope, chunks)
    assert answer["status"] == 413 and answer["json"]["error"]["type"] == "too_large"
    assert answer["headers"]["connection"] == "close"
    # read no more than the limit and the one chunk that passed it
    assert (answer["read"] - 1) * len(chunk) <= limit + len(chunk)


def test_a_declared_length_over_the_limit_is_refused_unread(client):
    resp = client.post("/analyze", content=b"{}", headers={"Content-Type": "application/json",
                                                            "Content-Length": str(1 << 30)})
    assert resp.status_code == 413 and resp.json()["error"]["type"] == "too_large"


# --- texts and characters per request ------------------------------------------------------


class CountingLock:
    def __init__(self) -> None:
        self.lock, self.taken = threading.Lock(), 0

    def __enter__(self) -> "CountingLock":
        self.lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def test_many_texts_are_refused_before_the_pipeline_lock(nlp):
    app = create_app(nlp, rate_limit=0)
    lock = app.state.analyzer.lock = CountingLock()
    client = TestClient(app)
    resp = client.post("/analyze", json={"texts": [""] * 200_000})
    assert resp.status_code == 413
    error = resp.json()["error"]
    assert error["type"] == "too_many_texts" and "at most 100" in error["message"]
    resp = client.post("/analyze", json={"texts": ["好。"] * 300 + ["长" * 200_000]})
    assert resp.status_code == 413
    assert lock.taken == 0
    assert client.post("/analyze", json={"texts": ["好。"] * 100}).status_code == 200
    assert lock.taken == 1


def test_characters_of_all_texts_together_are_capped(client):
    resp = client.post("/analyze", json={"texts": ["春" * 600, "秋" * 600]})
    assert resp.status_code == 413
    assert resp.json()["error"] == {"type": "too_long", "message": "the 2 texts have 1200 characters; this "
                                    "service accepts at most 1000 per request (serve --max-chars)"}


# --- /render: linear, capped ---------------------------------------------------------------


def big_record(k: int) -> Dict[str, Any]:
    """``k`` sentences of 5 characters, each with one component."""
    return {"id": "big", "text": "我们像花。" * k,
            "sentences": [{"start": 5 * i, "end": 5 * i + 5, "coarse": {"metaphor": 0.9}} for i in range(k)],
            "components": [{"start": 5 * i + 2, "end": 5 * i + 3, "label": "comparator", "score": 0.8} for i in range(k)],
            "parallelisms": [], "summary": {}}


def test_render_reads_each_span_a_bounded_number_of_times(monkeypatch):
    """The renderer's work grows with the record, not with its square: the
    number of times the spans' offsets are read is counted."""
    slot = render._Mark.__dict__["start"]
    reads = [0]

    class CountingMark(render._Mark):
        __slots__ = ()

        @property
        def start(self) -> int:
            reads[0] += 1
            return slot.__get__(self)

        @start.setter
        def start(self, value: int) -> None:
            slot.__set__(self, value)

    monkeypatch.setattr(render, "_Mark", CountingMark)
    for k in (500, 2000):
        reads[0] = 0
        html = render.render_record(big_record(k))
        assert html.count('class="rh-comp') == k
        assert reads[0] <= 20 * (2 * k), f"{reads[0]} reads of the offsets of {2 * k} spans"


def test_render_caps_the_spans_of_a_record(nlp):
    client = TestClient(create_app(nlp, max_spans=1000, rate_limit=0))
    resp = client.post("/render", json=big_record(600))  # 1,200 spans
    assert resp.status_code == 413
    assert resp.json()["error"]["type"] == "too_many_spans" and "at most 1000" in resp.json()["error"]["message"]
    assert client.post("/render", json=big_record(400)).status_code == 200


def test_render_trims_whitespace_without_scanning_it_per_span():
    text = "春" + " " * 5000 + "秋"
    record = {"text": text, "sentences": [{"start": i, "end": 5000 - i, "coarse": {"literal": 1.0}} for i in range(1, 50)]
              + [{"start": 0, "end": len(text), "coarse": {"metaphor": 0.5}}], "components": [], "parallelisms": []}
    html = render.render_essay(record)
    assert html.count('class="rh-sent') == 1  # whitespace-only spans are not marked


# --- bad numbers, types and Unicode: 422, never 500 ----------------------------------------


@pytest.mark.parametrize("path, body, where", [
    ("/render", b'{"text": "ab", "sentences": [{"start": 0, "end": 2, "coarse": {"metaphor": 1e400}}]}',
     "sentences.0.coarse.metaphor"),
    ("/render", b'{"text": "ab", "sentences": [{"start": 1e400, "end": 2}]}', "sentences.0.start"),
    ("/render", b'{"text": "ab", "summary": {"sentences": 1e400}}', "summary.sentences"),
    ("/render", b'{"text": "ab", "n_chars": NaN}', "n_chars"),
    ("/render", b'{"text": 5}', "text"),
    ("/render", b'{"text": 5, "error": {"type": "x", "message": "y"}}', "text"),
    ("/render", b'{"text": null, "error": {"type": "x", "message": "\\ud800"}}', "error.message"),
    ("/render", b'{"text": "ab", "components": [{"start": 0, "end": 1, "label": 7}]}', "components.0.label"),
    ("/analyze", b'{"text": "\\ud800\\u6625"}', "text"),
    ("/analyze", b'{"texts": ["ok", "\\udfff"]}', "texts.1"),
    ("/analyze", b'{"text": "ok", "id": "\\ud83d"}', "id"),
    ("/analyze", b'{"text": "ok", "\\ud800": 1}', ""),
    ("/suggest", b'{"text": "\\ud800", "sentence": 0, "rhetoric": "metaphor"}', "text"),
])
def test_bad_numbers_types_and_unicode_are_422(client, path, body, where):
    resp = post_raw(client, path, body)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request" and where in error["message"]
    resp.content.decode("utf8")  # the answer itself is valid UTF-8


def test_a_valid_record_renders_as_before(client):
    record = client.post("/analyze", json={"text": "春天像一个小姑娘。\n\n她笑了。"}).json()
    resp = client.post("/render", json=record)
    assert resp.status_code == 200
    assert resp.json()["html"] == render.render_record(record)


# --- slow clients ---------------------------------------------------------------------------


@pytest.fixture()
def live_server(nlp):
    """uvicorn as ``run`` configures it, header timeout 0.5 s, on a free loopback port."""
    import uvicorn

    app = create_app(nlp, rate_limit=0)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = serve_app.uvicorn_config(app, "127.0.0.1", port, header_timeout=0.5, timeout_keep_alive=5,
                                      max_header_bytes=4096, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=20)
    sock.close()


def closed_by_server(conn: socket.socket, wait: float = 30.0) -> bool:
    """Whether the server closes the connection (reading until EOF, at most ``wait`` seconds)."""
    conn.settimeout(wait)
    try:
        while conn.recv(4096):
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_clients_that_never_finish_their_headers_are_closed(live_server):
    silent = socket.create_connection(("127.0.0.1", live_server))
    trickling = socket.create_connection(("127.0.0.1", live_server))
    trickling.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    stop = threading.Event()

    def trickle() -> None:  # one more header byte every 0.1 s: never complete
        while not stop.is_set():
            try:
                trickling.sendall(b"a")
            except OSError:
                return
            time.sleep(0.1)

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        assert closed_by_server(silent)
        assert closed_by_server(trickling)
    finally:
        stop.set()
        silent.close()
        trickling.close()
    import httpx

    assert httpx.get(f"http://127.0.0.1:{live_server}/health", timeout=10).status_code == 200


def test_oversized_headers_are_refused_before_they_end(live_server):
    conn = socket.create_connection(("127.0.0.1", live_server))
    conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 8192)  # over 4096, not ended
    conn.settimeout(30)
    answer = conn.recv(4096)
    conn.close()
    assert answer.startswith(b"HTTP/1.1 4")


# --- the access token -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(nlp):
    return TestClient(create_app(nlp, auth_token=TOKEN, auth_token_env=TOKEN_ENV, rate_limit=0))


def test_the_api_needs_the_token(guarded):
    for path, body in (("/analyze", {"text": "好。"}), ("/render", {"text": "好。"}),
                       ("/suggest", {"text": "好。", "sentence": 0, "rhetoric": "metaphor"})):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": f"Bearer {TOKEN}x"}):
            resp = guarded.post(path, json=body, headers=headers)
            assert resp.status_code == 401, (path, headers)
            assert resp.json()["error"]["type"] == "unauthorized" and resp.headers["www-authenticate"] == "Bearer"
            assert TOKEN not in resp.text
    ok = guarded.post("/analyze", json={"text": "好。"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and TOKEN not in ok.text


def test_the_page_and_health_stay_open(guarded):
    for path in ("/", "/static/app.js", "/health", "/openapi.json"):
        assert guarded.get(path).status_code == 200, path
    assert guarded.get("/health").json()["auth"] is True


def test_the_token_is_compared_in_constant_time(guarded, monkeypatch):
    import hmac

    from spacy_rhetoric.serve import limits

    calls = []
    original = hmac.compare_digest
    monkeypatch.setattr(limits.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or original(a, b))
    guarded.post("/analyze", json={"text": "好。"}, headers={"Authorization": "Bearer nope"})
    assert calls == [(b"nope", TOKEN.encode())]


def test_the_token_comes_from_its_variable_never_a_value(monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, TOKEN + "\n")
    assert serve_app.read_auth_token(TOKEN_ENV) == TOKEN
    monkeypatch.setenv(TOKEN_ENV, "  ")
    with pytest.raises(ValueError, match=f"{TOKEN_ENV} is not set or empty"):
        serve_app.read_auth_token(TOKEN_ENV)
    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(ValueError, match="not set"):
        serve_app.read_auth_token(TOKEN_ENV)


def test_the_token_is_redacted_from_errors(nlp, monkeypatch, caplog):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    app = create_app(nlp, auth_token=TOKEN, auth_token_env=TOKEN_ENV, rate_limit=0)

    def explode(ids, texts):
        raise RuntimeError(f"the token {TOKEN} leaked into an error")

    monkeypatch.setattr(app.state.analyzer, "records", explode)
    client = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level("ERROR", logger="spacy_rhetoric.serve"):
        resp = client.post("/analyze", json={"text": "好。"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 500 and TOKEN not in resp.text
    assert "leaked" in caplog.text and TOKEN not in caplog.text


# --- the rate limit ---------------------------------------------------------------------------


def test_token_buckets_refill_at_their_rate():
    now = [100.0]
    buckets = TokenBuckets(rate=2.0, burst=3, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0.0  # another client has its own bucket
    now[0] += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0


def test_a_client_over_its_rate_gets_429_with_retry_after(nlp):
    client = TestClient(create_app(nlp, rate_limit=0.01, rate_burst=3))
    answers = [client.post("/analyze", json={"text": "好。"}) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["error"]["type"] == "rate_limited"
    assert int(answers[-1].headers["retry-after"]) >= 1
    assert client.get("/static/app.js").status_code == 200  # the page's files do not count


# --- security headers -------------------------------------------------------------------------


def test_every_answer_carries_the_security_headers(nlp):
    client = TestClient(create_app(nlp, auth_token=TOKEN, rate_limit=0.01, rate_burst=5))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    answers = [client.get("/"), client.get("/static/app.js"), client.get("/health"), client.get("/nowhere", headers=auth),
               client.post("/analyze", json={"text": 1}, headers=auth),
               client.post("/analyze", json={}), client.post("/analyze", json={})]
    assert [a.status_code for a in answers] == [200, 200, 200, 404, 422, 401, 429]
    for a in answers:
        assert a.headers["content-security-policy"] == PAGE_CSP
        assert a.headers["x-content-type-options"] == "nosniff"
        assert a.headers["x-frame-options"] == "DENY"
        assert a.headers["referrer-policy"] == "no-referrer"
    policy = dict(part.strip().split(" ", 1) for part in PAGE_CSP.split(";"))
    assert policy["script-src"] == "'self'" and policy["frame-ancestors"] == "'none'"
    docs = TestClient(create_app(nlp, rate_limit=0)).get("/docs")
    assert docs.status_code == 200 and "'unsafe-inline'" not in docs.headers["content-security-policy"].split(";")[1]


def test_the_page_has_no_inline_script_or_style(client):
    import re

    page = client.get("/").text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/rhetoric.js">', '<script src="/static/app.js">']
    assert "<style" not in page and " style=" not in page
    assert not re.search(r"<[^>]+\son[a-z]+=", page)  # no event handler attributes


# --- start-up ---------------------------------------------------------------------------------


def test_binding_beyond_loopback_without_a_token_warns(nlp, monkeypatch):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    lines: List[str] = []
    serve_app.run(nlp, host="0.0.0.0", port=0, echo=lines.append)
    assert len(lines) == 2 and lines[1].startswith("warning: listening on 0.0.0.0 without authentication")
    lines.clear()
    serve_app.run(nlp, host="127.0.0.1", port=0, echo=lines.append)
    assert len(lines) == 1
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    lines.clear()
    serve_app.run(nlp, host="0.0.0.0", port=0, auth_token_env=TOKEN_ENV, echo=lines.append)
    assert len(lines) == 1 and "token required" in lines[0] and TOKEN not in lines[0]


def test_a_generator_whose_files_are_missing_fails_at_start(nlp, tmp_path, monkeypatch):
    """The shipped Gemma config in a checkout without its assets: the
    message names the project commands that build them."""
    config = ROOT / "configs" / "generator_gemma.cfg"
    monkeypatch.chdir(tmp_path)  # its relative paths resolve here, where nothing is built
    with pytest.raises(serve_app.GeneratorNotReady) as err:
        create_app(nlp, generator_config=config, project_file=ROOT / "project.yml")
    message = str(err.value)
    assert "\n" not in message
    for command in ("generator-model", "finetune-generator-rhetoric", "kenlm-model"):
        assert f"spacy project run {command}" in message


def test_serve_command_says_what_to_build(nlp, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from spacy_rhetoric.cli import app as cli

    nlp.to_disk(tmp_path / "pipeline")
    config = tmp_path / "generator.cfg"
    config.write_text((ROOT / "configs" / "generator_gemma.cfg").read_text(encoding="utf8"), encoding="utf8")
    work = tmp_path / "project"
    work.mkdir()
    (work / "project.yml").write_text((ROOT / "project.yml").read_text(encoding="utf8"), encoding="utf8")
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli, ["serve", "--model", str(tmp_path / "pipeline"), "--port", "0",
                                      "--generator-config", str(config)])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "spacy project run generator-model" in lines[0]
    assert "suggestions on" not in result.output


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_suggest_is_503_when_the_backend_is_down(nlp, tmp_path):
    config = write_generator_config(tmp_path / "generator.cfg", f"http://127.0.0.1:{free_port()}/v1")
    client = TestClient(create_app(nlp, generator_config=config, rate_limit=0))
    resp = client.post("/suggest", json={"text": "今天很冷。", "sentence": 0, "rhetoric": "metaphor", "object": "今天"})
    assert resp.status_code == 503
    assert resp.json()["error"]["type"] == "generator_unavailable"
    assert "cannot be reached" in resp.json()["error"]["message"]


class BrokenGenerator:
    """A generator whose model does not load (as peft says of a missing adapter)."""

    cfg = {"verify": False, "rewrite": False, "weights": {}}
    backend = None

    def suggest(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Can't find 'adapter_config.json' at 'training/generator-gemma-rhetoric/adapter'")


def test_suggest_is_503_when_the_generator_cannot_run(nlp, caplog):
    client = TestClient(create_app(nlp, generator=BrokenGenerator(), rate_limit=0))
    with caplog.at_level("ERROR", logger="spacy_rhetoric.serve"):
        resp = client.post("/suggest", json={"text": "今天很冷。", "sentence": 0, "rhetoric": "metaphor",
                                             "object": "今天"})
    assert resp.status_code == 503
    error = resp.json()["error"]
    assert error["type"] == "generator_unavailable" and "adapter_config" not in error["message"]
    assert "adapter_config.json" in caplog.text
    bad = client.post("/suggest", json={"text": "今天很冷。", "sentence": 0, "rhetoric": "metaphor", "object": "今天",
                                        "weights": {"analyser": -1}})
    assert bad.status_code == 422 and "weights" in bad.json()["error"]["message"]
