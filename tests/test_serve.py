"""``rhetoric serve`` in process: every status of the API with
FastAPI's TestClient over the shipped pipeline ``pipelines/zh_rhetoric``,
the shared renderer (``spacy_rhetoric.analysis.render``), the page's files.
The real server, the load test and the browser tests are in
tests/test_serve_live.py."""
from __future__ import annotations

import json
import logging
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import spacy

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'spacy-rhetoric[serve]'")
from fastapi.testclient import TestClient  # noqa: E402

from fake_openai import FakeOpenAIServer, status, valid  # noqa: E402
from spacy_rhetoric.analysis.driver import analyze  # noqa: E402
from spacy_rhetoric.analysis.io import iter_inputs  # noqa: E402
from spacy_rhetoric.analysis.records import SCHEMA  # noqa: E402
from spacy_rhetoric.serve import create_app  # noqa: E402
from spacy_rhetoric.analysis.render import render_essay, render_record, static_text  # noqa: E402

PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "zh_rhetoric"
SECRET = "sk-test-0123456789abcdef"
KEY_ENV = "RHETORIC_SERVE_TEST_API_KEY"


@pytest.fixture(scope="module")
def nlp():
    return spacy.load(PIPELINE)


@pytest.fixture(scope="module")
def client(nlp):
    return TestClient(create_app(nlp))


@pytest.fixture(scope="module")
def essay_328(pse_dir: Path):
    return next(iter_inputs([pse_dir / "xml" / "328.xml"]))


def write_generator_config(path: Path, base_url: str, key_env: str = KEY_ENV) -> Path:
    path.write_text(f"""
[components]

[components.rhetoric_generator]
factory = "rhetoric_generator"

[components.rhetoric_generator.sampling]
n_candidates = 2
temperature = 0.0

[components.rhetoric_generator.model]
@llm_backends = "spacy_rhetoric.OpenAICompatible.v1"
base_url = "{base_url}"
model = "fake"
api_key_env = "{key_env}"
timeout = 10.0
max_retries = 0
""", encoding="utf8")
    return path


# --- a small HTML reader for the rendered fragments --------------------------------


class Fragment(HTMLParser):
    """Elements (tag, attrs) in document order, the text inside
    ``div.rh-essay``, and a check that tags nest properly."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: List[Tuple[str, Dict[str, str]]] = []
        self.stack: List[Tuple[str, Dict[str, str]]] = []
        self.essay_text: List[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        attrs = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attrs))
        if tag not in ("br", "input", "meta", "link"):
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1][0] == tag, f"</{tag}> does not close {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if any(a.get("class") == "rh-essay" for _, a in self.stack):
            self.essay_text.append(data)

    def marked(self, attr: str) -> Dict[str, Dict[str, str]]:
        """The marked elements carrying ``attr``, one per ``data-key``."""
        return {a["data-key"]: a for _, a in self.elements if attr in a}


def parse(fragment: str) -> Fragment:
    reader = Fragment()
    reader.feed(fragment)
    reader.close()
    assert not reader.stack
    return reader


def assert_matches_record(reader: Fragment, record: Dict[str, Any]) -> None:
    """The marked elements say what the record says (the page's test does the same in a browser)."""
    assert "".join(reader.essay_text) == record["text"]  # as written: nothing added, nothing lost
    sents = reader.marked("data-sentence")
    assert len(sents) == len(record["sentences"])
    for key, attrs in sents.items():
        s = record["sentences"][int(attrs["data-sentence"])]
        devices = [k for k, _ in sorted(s["coarse"].items(), key=lambda kv: -kv[1]) if k != "literal"]
        assert attrs.get("data-rhetoric", "") == (" ".join(devices) or ("literal" if s["coarse"] else ""))
        assert (int(attrs["data-start"]), int(attrs["data-end"])) == (s["start"], s["end"])
    comps = {(a["data-component"], int(a["data-start"]), int(a["data-end"])) for a in reader.marked("data-component").values()}
    assert comps == {(c["label"], c["start"], c["end"]) for c in record["components"]}
    units = {(a["data-figure"], int(a["data-start"]), int(a["data-end"])) for a in reader.marked("data-figure").values()}
    assert units == {(u["label"], u["start"], u["end"]) for u in record.get("figurative_units", [])}
    groups: Dict[int, set] = {}
    for a in reader.marked("data-parallelism").values():
        groups.setdefault(int(a["data-parallelism"]), set()).add((int(a["data-start"]), int(a["data-end"])))
    assert groups == {g: {(b["start"], b["end"]) for b in p["branches"]}
                      for g, p in enumerate(record["parallelisms"], start=1)}


# --- /health, /analyze ------------------------------------------------------------------


def test_health(client, nlp):
    resp = client.get("/health")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "ok" and body["model"] == {"name": "zh_rhetoric", "version": nlp.meta["version"]}
    assert body["pipeline"] == nlp.pipe_names and body["suggest"] is False and body["schema"] == SCHEMA


def test_analyze_gives_the_record_analyze_writes(client, nlp, essay_328, tmp_path):
    resp = client.post("/analyze", json={"text": essay_328.text})
    assert resp.status_code == 200
    record = resp.json()
    out = tmp_path / "a.jsonl"
    analyze([essay_328.path], out, model=nlp, progress=False)
    written = json.loads(out.read_text(encoding="utf8"))
    assert record["schema"] == SCHEMA and record["id"] == "text" and record["path"] is None
    strip = ("id", "path", "encoding")
    assert {k: v for k, v in record.items() if k not in strip} == {k: v for k, v in written.items() if k not in strip}
    assert record["sentences"] and record["parallelisms"]


def test_figurative_units_reach_the_record_and_the_page(client, nlp, tmp_path):
    # three parallel similes written for the tests; the shipped pipelines
    # mark each clause as a 比喻 unit (tests/test_figurative_units.py)
    text = "蓝的像海，绿的像玉，金的像阳光。"
    record = client.post("/analyze", json={"text": text}).json()
    units = [(text[u["start"]:u["end"]], u["label"], u["label_zh"]) for u in record["figurative_units"]]
    assert ("蓝的像海，", "metaphor", "比喻") in units
    html = client.post("/render", json=record).json()["html"]
    assert 'data-figure="metaphor"' in html and 'data-tag="比喻"' in html and "rh-legend-figures" in html
    # the same units in what `rhetoric analyze` writes, and in its report
    source = tmp_path / "similes.txt"
    source.write_text(text, encoding="utf8")
    out = tmp_path / "out.jsonl"
    analyze([source], out, model=nlp, progress=False)
    written = json.loads(out.read_text(encoding="utf8"))
    assert written["figurative_units"] == record["figurative_units"]
    report = tmp_path / "report.html"
    analyze([source], report, model=nlp, fmt="html", progress=False)
    page = report.read_text(encoding="utf8")
    assert page.count('data-tag="比喻"') == len(units) and page.count('class="rh-legend"') == 1


def test_analyze_texts_batch(client, essay_328):
    paras = [p for p in essay_328.text.split("\n") if p.strip()][:3]
    resp = client.post("/analyze", json={"texts": paras})
    assert resp.status_code == 200
    records = resp.json()
    assert [r["id"] for r in records] == ["text-1", "text-2", "text-3"]
    single = [client.post("/analyze", json={"text": p, "id": f"text-{i}"}).json() for i, p in enumerate(paras, 1)]
    assert records == single
    named = client.post("/analyze", json={"texts": paras[:2], "ids": ["a", "b"]}).json()
    assert [r["id"] for r in named] == ["a", "b"]
    assert client.post("/analyze", json={"texts": []}).json() == []


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_an_empty_analysis(client, text):
    resp = client.post("/analyze", json={"text": text})
    assert resp.status_code == 200
    record = resp.json()
    assert record["sentences"] == record["components"] == record["parallelisms"] == []
    assert record["summary"]["sentences"] == 0 and record["text"] == text


@pytest.mark.parametrize("body, where", [
    (b'{"text": "\xe6\x9c\x88\xe4\xba\xae', "malformed JSON"),       # cut off
    (b"not json at all", "malformed JSON"),
    (b"{}", "exactly one of"),                                       # missing field
    (b'{"txt": "x"}', "txt"),                                        # misspelt field
    (b'{"text": 12}', "text"),                                       # wrong type
    (b'{"texts": "one string"}', "texts"),
    (b'{"text": "a", "texts": ["b"]}', "exactly one of"),
    (b'["a", "b"]', "object"),                                  # not an object
    (b'{"texts": ["a"], "ids": ["x", "y"]}', "ids"),
])
def test_bad_input_is_422_json(client, body, where):
    resp = client.post("/analyze", content=body, headers={"Content-Type": "application/json"})
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["type"] == "invalid_request" and where in error["message"]
    assert "Traceback" not in resp.text and "File \"" not in resp.text


def test_too_long_is_413(nlp):
    small = TestClient(create_app(nlp, max_chars=50))
    assert small.post("/analyze", json={"text": "月" * 50}).status_code == 200
    resp = small.post("/analyze", json={"text": "月" * 51})
    assert resp.status_code == 413 and resp.json()["error"]["type"] == "too_long"
    assert "51 characters" in resp.json()["error"]["message"] and "50" in resp.json()["error"]["message"]
    assert small.post("/analyze", json={"texts": ["月" * 30, "星" * 30]}).status_code == 413
    # a body far larger than 50 characters could need is refused before it is read
    huge = b'{"text": "' + b"a" * (24 * 50 + (1 << 20)) + b'"}'
    resp = small.post("/analyze", content=huge, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and resp.json()["error"]["type"] == "too_large"
    assert small.get("/health").json()["max_chars"] == 50


def test_unknown_path_and_method(client):
    resp = client.get("/nowhere")
    assert resp.status_code == 404 and resp.json()["error"]["type"] == "not_found"
    resp = client.get("/analyze")
    assert resp.status_code == 405 and resp.json()["error"]["type"] == "method_not_allowed"


def test_pipeline_failure_is_the_error_record():
    nlp = spacy.blank("zh")

    @spacy.Language.component("serve_test_explodes")
    def explodes(doc):
        if "炸" in doc.text:
            raise RuntimeError("this component fails on 炸")
        return doc

    nlp.add_pipe("serve_test_explodes")
    client = TestClient(create_app(nlp))
    resp = client.post("/analyze", json={"text": "炸弹"})
    assert resp.status_code == 500
    body = resp.json()
    assert body["schema"] == SCHEMA and body["error"]["type"] == "analysis_error" and "炸" in body["error"]["message"]
    resp = client.post("/analyze", json={"texts": ["好天气。", "炸弹"]})
    assert resp.status_code == 200
    assert ["error" in r for r in resp.json()] == [False, True]


def test_unexpected_error_is_500_json_without_traceback_or_secret(nlp, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    app = create_app(nlp)

    def boom(ids, texts):
        raise RuntimeError(f"unexpected failure with {SECRET}")

    monkeypatch.setattr(app.state.analyzer, "records", boom)
    with caplog.at_level(logging.ERROR, logger="spacy_rhetoric.serve"):
        resp = TestClient(app).post("/analyze", json={"text": "好"})
    assert resp.status_code == 500
    assert resp.json() == {"error": {"type": "internal_error", "message": "internal error (RuntimeError); see the service log"}}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "unexpected failure with ***" in logged and SECRET not in logged and SECRET not in resp.text


# --- /suggest ---------------------------------------------------------------------------


def test_suggest_without_generator_is_503(client):
    resp = client.post("/suggest", json={"text": "今天很冷。", "sentence": 0, "rhetoric": "metaphor", "object": "风"})
    assert resp.status_code == 503
    assert resp.json()["error"]["type"] == "generator_unavailable" and "--generator-config" in resp.json()["error"]["message"]


def test_suggest_with_a_backend(nlp, essay_328, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    record = TestClient(create_app(nlp)).post("/analyze", json={"text": essay_328.text}).json()
    literal = next(i for i, s in enumerate(record["sentences"]) if "literal" in s["coarse"])
    with FakeOpenAIServer(default=valid('{"generation": "人生像一场漫长的旅行。"}', '{"generation": "人生如梦。"}')) as srv:
        config = write_generator_config(tmp_path / "gen.cfg", srv.base_url)
        client = TestClient(create_app(nlp, generator_config=config))
        assert client.get("/health").json()["suggest"] is True
        assert client.get("/health").json()["pipeline"] == nlp.pipe_names  # the generator stays outside the analysis
        resp = client.post("/suggest", json={"text": essay_328.text, "sentence": literal, "rhetoric": "metaphor",
                                             "object": "人生"})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["object"] == "人生" and body["text"] == record["sentences"][literal]["text"]
        assert sorted(c["text"] for c in body["candidates"]) == ["人生像一场漫长的旅行。", "人生如梦。"]
        # each candidate was analysed in its context by the served pipeline: verified ones first, with evidence
        assert body["verification"] == "on" and body["n_drawn"] == 2
        simile = next(c for c in body["candidates"] if c["text"] == "人生像一场漫长的旅行。")
        assert simile["verified"] is True and body["candidates"][0] == simile, body
        assert {"metaphor", "tenor"} <= {e["label"] for e in simile["evidence"]}
        assert any(e["label"] == "tenor" and "人生" in e["text"] for e in simile["evidence"])
        assert all(simile["text"][e["start"]:e["end"]] == e["text"] for e in simile["evidence"])
        assert body["message"].startswith(f"{body['n_verified']} of 2 candidates drawn verified")
        prompt = srv.requests[-1].body["messages"][0]["content"]
        assert "人生" in prompt and record["sentences"][literal]["text"].strip() in prompt
        assert srv.requests[-1].headers.get("Authorization") == f"Bearer {SECRET}"
        # the object defaults to the sentence's predicted tenor; none in a literal sentence -> 422
        resp = client.post("/suggest", json={"text": essay_328.text, "sentence": literal, "rhetoric": "metaphor"})
        assert resp.status_code == 422 and resp.json()["error"]["type"] == "no_object"
        resp = client.post("/suggest", json={"text": essay_328.text, "sentence": 999, "rhetoric": "metaphor", "object": "x"})
        assert resp.status_code == 422 and "out of range" in resp.json()["error"]["message"]
        resp = client.post("/suggest", json={"text": essay_328.text, "sentence": 0, "rhetoric": "irony", "object": "x"})
        assert resp.status_code == 422
        resp = client.post("/suggest", json={"text": essay_328.text, "rhetoric": "metaphor"})
        assert resp.status_code == 422 and "sentence" in resp.json()["error"]["message"]


def test_suggest_says_when_none_verified_and_takes_settings(nlp, essay_328, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with FakeOpenAIServer(default=valid('{"generation": "今天我去上学了。"}', '{"generation": "我们吃完饭就回家了。"}')) as srv:
        client = TestClient(create_app(nlp, generator_config=write_generator_config(tmp_path / "gen.cfg", srv.base_url)))
        request = {"text": essay_328.text, "sentence": 0, "rhetoric": "personification", "object": "人生",
                   "n": 2, "time_budget": 30, "weights": {"fluency": 0.0}}
        resp = client.post("/suggest", json=request)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["n_verified"] == 0 and body["message"].startswith("none of the 2 candidates drawn was verified")
        assert all(c["verified"] is False and c["reason"] for c in body["candidates"])
        assert client.post("/suggest", json={**request, "rhetoric": "parallelism", "object": "我们"}).json()["n_verified"] == 0
        resp = client.post("/suggest", json={**request, "weights": {"beauty": 1}})
        assert resp.status_code == 422 and "unknown ranking weight" in resp.json()["error"]["message"]
        assert client.post("/suggest", json={**request, "time_budget": -1}).status_code == 422


def test_suggest_backend_failure_is_502_without_secret(nlp, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    body = json.dumps({"error": {"message": f"invalid api key {SECRET}"}})
    with FakeOpenAIServer(default=status(401, body=body)) as srv:
        client = TestClient(create_app(nlp, generator_config=write_generator_config(tmp_path / "gen.cfg", srv.base_url)))
        with caplog.at_level(logging.DEBUG):
            resp = client.post("/suggest", json={"text": "今天很冷。", "sentence": 0, "rhetoric": "metaphor", "object": "风"})
    assert resp.status_code == 502 and resp.json()["error"]["type"] == "generator_failed"
    assert "401" in resp.json()["error"]["message"]
    assert SECRET not in resp.text
    assert SECRET not in "\n".join(r.getMessage() for r in caplog.records)


# --- /render, the page and the shared renderer ---------------------------------------------


def test_render_endpoint(client, essay_328):
    record = client.post("/analyze", json={"text": essay_328.text}).json()
    resp = client.post("/render", json=record)
    assert resp.status_code == 200
    reader = parse(resp.json()["html"])
    assert_matches_record(reader, record)
    assert resp.json()["html"] == render_record(record)
    assert client.post("/render", json={"text": 3}).status_code == 422
    assert client.post("/render", json={"text": "好", "sentences": [{"start": 0, "end": 1, "coarse": {"metaphor": "x"}}]}).status_code == 422


def test_page_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for needle in ('id="essay-input"', 'id="analyse"', "/static/rhetoric.js", "/static/app.js", "/static/rhetoric.css"):
        assert needle in page.text
    for name in ("rhetoric.js", "app.js", "rhetoric.css", "page.css"):
        resp = client.get(f"/static/{name}")
        assert resp.status_code == 200 and resp.text == static_text(name)
    # no CDN, nothing fetched from elsewhere
    for name in ("index.html", "rhetoric.js", "app.js", "rhetoric.css", "page.css"):
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", static_text(name)), name


def test_render_keeps_the_essay_as_written(client, essay_328):
    record = client.post("/analyze", json={"text": essay_328.text}).json()
    reader = parse(render_essay(record))
    assert "".join(reader.essay_text) == essay_328.text
    assert "\n" in essay_328.text and "人生是“闲敲棋子落灯花”的等待" in "".join(reader.essay_text)


def test_render_splits_crossing_spans_into_pieces():
    text = "春天来了，花开了。夏天来了，树绿了。\n秋天来了，叶黄了。"
    record = {
        "text": text,
        "sentences": [{"start": 0, "end": 9, "text": text[0:9], "coarse": {"parallelism": 0.9, "metaphor": 0.6}, "form": {}, "content": {}},
                      {"start": 9, "end": 19, "text": text[9:19], "coarse": {"literal": 0.1}, "form": {}, "content": {}},
                      {"start": 19, "end": 28, "text": text[19:28], "coarse": {}, "form": {}, "content": {}}],
        # a component running over the end of the first branch
        "components": [{"label": "tenor", "start": 3, "end": 7, "text": text[3:7], "score": 0.5}],
        # a branch running over the end of the first sentence
        "parallelisms": [{"id": "parallelism_1", "branches": [{"start": 0, "end": 4, "text": text[0:4]},
                                                              {"start": 5, "end": 13, "text": text[5:13]}]}],
        "clauses": [], "summary": {},
    }
    reader = parse(render_essay(record))
    assert "".join(reader.essay_text) == text
    pieces = [a for _, a in reader.elements if a.get("data-key") == "p1.2"]
    assert len(pieces) == 2  # split at the sentence end
    assert [("rh-first" in a["class"], "rh-last" in a["class"]) for a in pieces] == [(True, False), (False, True)]
    assert len([a for _, a in reader.elements if a.get("data-key") == "c0"]) == 3  # in, between, in the branches
    sents = reader.marked("data-sentence")
    assert sents["s0"]["data-rhetoric"] == "parallelism metaphor" and "repeating-linear-gradient" in sents["s0"]["style"]
    assert sents["s1"]["data-rhetoric"] == "literal" and "data-rhetoric" not in sents["s2"]
    assert_matches_record(reader, record)
    # the line break stays outside the sentence element, so the badge ends its line
    assert sents["s1"]["data-end"] == "19" and text[18] == "\n"


def test_render_marks_figurative_units_with_their_chinese_names():
    text = "难道我们不该珍惜时间吗？时间像流水，一去不返。\n春来了，春来了，春真的来了！"
    q_end, s1_end = text.index("？") + 1, text.index("\n") + 1
    record = {
        "text": text,
        "sentences": [{"start": 0, "end": q_end, "coarse": {"literal": 0.2}},
                      {"start": q_end, "end": s1_end, "coarse": {"metaphor": 0.9}},
                      {"start": s1_end, "end": len(text), "coarse": {"literal": 0.3}}],
        "components": [{"label": "vehicle", "start": text.index("流水"), "end": text.index("流水") + 2, "score": 0.8}],
        "parallelisms": [],
        # a unit over a sentence end (split into pieces), a unit inside a sentence, one of the last paragraph
        "figurative_units": [
            {"start": 0, "end": s1_end - 1, "label": "rhetorical_question", "label_zh": "问语"},
            {"start": q_end, "end": text.index("，", q_end) + 1, "label": "metaphor", "label_zh": "比喻"},
            {"start": s1_end, "end": len(text), "label": "repetition", "label_zh": "反复"},
        ],
        "summary": {},
    }
    html = render_record(record)
    reader = parse(html)
    assert_matches_record(reader, record)
    tags = {a["data-figure"]: a["data-tag"] for _, a in reader.elements if "data-figure" in a}
    assert tags == {"rhetorical_question": "问语", "metaphor": "比喻", "repetition": "反复"}
    pieces = [a for _, a in reader.elements if a.get("data-key") == "u0"]
    assert len(pieces) == 2 and "rh-first" in pieces[0]["class"] and "rh-last" in pieces[1]["class"]
    colours = {a["data-figure"]: a["style"] for _, a in reader.elements if "data-figure" in a}
    assert len(set(colours.values())) == 3  # one colour per figure type
    # the summary counts them and the legend names all 12 types, in Chinese
    assert "修辞格 figures:" in html and "问语 rhetorical_question 1" in html
    legend = html[html.index('class="rh-legend"'):]
    assert all(zh in legend for zh in ("比喻", "比拟", "借代", "夸张", "反语", "通感", "问语", "排比", "对偶", "反复", "对比", "引语"))
    # a record without the key (a pipeline without the component) shows no figure legend
    assert "rh-legend-figures" not in render_record({k: v for k, v in record.items() if k != "figurative_units"})


def test_render_escapes_the_text():
    text = '<script>alert("x")</script> & 月亮'
    record = {"text": text, "sentences": [{"start": 0, "end": len(text), "coarse": {"literal": 0.2}}],
              "components": [], "parallelisms": []}
    html = render_record(record)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "".join(parse(html).essay_text) == text
