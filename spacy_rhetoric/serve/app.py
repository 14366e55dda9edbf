"""``rhetoric serve``: the REST service and the page for teachers (FastAPI).

Endpoints (all answers JSON except the page and its static files):

``GET /``
    the page: paste an essay, analyse it, see it marked (static files in
    ``spacy_rhetoric/serve/static``; no build step, nothing from a CDN).
``GET /health``
    ``{"status": "ok", "model": {"name", "version"}, "pipeline": [...],
    "suggest": bool, "max_chars": int, "schema": str}``.
``POST /analyze``
    ``{"text": str, "id"?: str}`` -> one ``spacy-rhetoric/analysis/v1``
    record (what ``rhetoric analyze`` writes, built by
    :func:`spacy_rhetoric.records.doc_to_record`; ``path`` and ``encoding``
    null, ``id`` default ``"text"``), or ``{"texts": [str], "ids"?: [str]}``
    -> a JSON array of records (ids default ``text-1``, ``text-2``, ...).
    Empty or whitespace text gives the empty analysis. A text the pipeline
    fails on gets the error record of ``analyze`` (``"error": {"type":
    "analysis_error", ...}``): status 500 for ``text``, inside the array
    (status 200) for ``texts``.
``POST /render``
    an analysis record -> ``{"html": fragment}``, the rendering of
    :mod:`spacy_rhetoric.render` that the page shows and the static
    report embeds (the page calls ``/analyze`` and then this).
``POST /suggest``
    ``{"text", "sentence", "rhetoric", "object"?, "n"?, "weights"?,
    "time_budget"?}``: ``sentence`` is an index into the record's
    ``sentences``, ``rhetoric`` one of metaphor, personification, hyperbole,
    parallelism; ``object`` defaults to the sentence's predicted object
    component (tenor, personification/hyperbole object, parallelism marker);
    ``n``, ``weights`` and ``time_budget`` override the generator's settings
    for this request. Every candidate is analysed in its context by the
    pipeline this service serves (:mod:`spacy_rhetoric.llm.verify`).
    -> ``{"sentence", "start", "end", "text", "rhetoric", "object",
    "candidates": [{"text", "verified", "evidence", "reason", "score",
    "analyser_score", "fluency", "logprob", "repaired"}], "failures": [{"raw",
    "error"}], "n_drawn", "n_verified", "verification", "budget_exhausted",
    "message"}``: verified candidates first (best first, each with the spans
    the analyser found as ``evidence``), then the unverified ones with the
    ``reason``; ``message`` says plainly when none verified. From the
    ``rhetoric_generator`` built from ``--generator-config``, or from the
    pipeline's own generator. Without one: 503. When every answer of the
    backend failed: 502.

Errors are ``{"error": {"type": str, "message": str}}`` (validation errors
add ``"detail"``: location and message of each problem, never the input):
422 for malformed JSON, a missing or wrongly typed field, both or neither of
``text``/``texts``, an out-of-range sentence or a missing object; 413 when
the characters of one request (``text``, or all ``texts`` together) exceed
``max_chars`` (or its body is far larger than that could need); 404/405 for
unknown paths/methods; 503 and 502 as above; 500 ``internal_error`` for
anything unexpected, whose traceback goes to the log (with secrets
redacted), never to the client.

Worker model. spaCy's ``Language`` is not safe to call from two threads at
once, so the service loads the pipeline once and guards it with one lock:
endpoints are plain ``def`` functions that FastAPI runs in its threadpool
(up to 40 threads), so requests are received, validated, serialised and
answered concurrently, while the pipeline itself analyses one request at a
time (a ``texts`` request as one ``nlp.pipe`` batch), torch on one thread
(a transformer encoder's ``cpu_threads`` apply in the main thread only:
:func:`spacy_rhetoric.ml.threads.encoder_threads`).
Throughput is therefore one pipeline's; to use more cores, run several
``serve`` processes (each loads its own pipeline, about 0.75 GiB) behind a
proxy, or use ``rhetoric analyze --engine ray`` for batches. Generation
(``/suggest``) runs outside the pipeline lock: requests to an
OpenAI-compatible server run concurrently (the backend bounds its own
concurrency); a local Transformers backend is guarded by a lock of its own.

Secrets: the generator config names the API key *variable*
(``api_key_env``); its value is read per request by the backend, which
redacts it from its errors. The service additionally replaces the value of
that variable, and of any environment variable whose name contains
``API_KEY``, ``TOKEN`` or ``SECRET``, by ``***`` in every error it returns
or logs.
"""
from __future__ import annotations

import logging
import threading
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, model_validator
from spacy.language import Language
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..analysis_io import InputDoc
from ..llm.redaction import environment_secrets
from ..llm.redaction import redact as redact_secrets
from ..records import SCHEMA, model_info, single_torch_thread
from ..pipeline import load_pipeline
from ..taxonomy import REQUEST_OBJECT
from ..render import render_record, static_text

logger = logging.getLogger("spacy_rhetoric.serve")

DEFAULT_MAX_CHARS = 100_000
STATIC_DIR = Path(__file__).parent / "static"


class ServiceError(Exception):
    """An error answered as ``{"error": {"type", "message"}}`` with ``status``."""

    def __init__(self, status: int, type: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.type, self.message, self.extra = status, type, message, extra


# --- request bodies ----------------------------------------------------------------


class AnalyzeRequest(BaseModel):
    """``{"text": ...}`` or ``{"texts": [...]}`` (exactly one)."""

    model_config = ConfigDict(extra="forbid")
    text: Optional[str] = Field(None, description="One document")
    texts: Optional[List[str]] = Field(None, description="Several documents (one nlp.pipe batch)")
    id: Optional[str] = Field(None, description="Record id of text (default: text)")
    ids: Optional[List[str]] = Field(None, description="Record ids of texts (default: text-1, text-2, ...)")

    @model_validator(mode="after")
    def _one_of(self) -> "AnalyzeRequest":
        if (self.text is None) == (self.texts is None):
            raise ValueError('give exactly one of "text" (a string) or "texts" (a list of strings)')
        if self.ids is not None and (self.texts is None or len(self.ids) != len(self.texts)):
            raise ValueError('"ids" needs "texts" and one id per text')
        return self


#: What ``/suggest`` returns of each candidate (``raw`` only for failures).
CANDIDATE_FIELDS = ("text", "verified", "evidence", "reason", "score", "analyser_score", "fluency", "logprob", "repaired")


class SuggestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(..., description="The essay")
    sentence: int = Field(..., ge=0, description="Index into the analysis record's sentences")
    rhetoric: str = Field(..., pattern="^(metaphor|personification|hyperbole|parallelism)$")
    object: Optional[str] = Field(None, description="Tenor / personification object / hyperbole object / "
                                                    "parallelism marker; default: the sentence's predicted one")
    n: Optional[int] = Field(None, ge=1, le=16, description="Candidates to draw (default: the generator's)")
    weights: Optional[Dict[str, float]] = Field(None, description="Ranking weights: analyser, fluency, reranker "
                                                                  "(>= 0; missing ones keep the generator's)")
    time_budget: Optional[float] = Field(None, ge=0, le=600, description="Seconds for drawing candidates "
                                                                        "(0 = none; default: the generator's)")


# --- the pipeline and the generator --------------------------------------------------


class Analyzer:
    """The pipeline, loaded once, behind one lock (module docstring)."""

    def __init__(self, nlp: Language, max_chars: int) -> None:
        self.nlp = nlp
        self.max_chars = int(max_chars)
        self.lock = threading.Lock()
        self.info = model_info(nlp)
        # a text up to max_chars must reach the pipeline
        nlp.max_length = max(nlp.max_length, self.max_chars + 1)

    def check_size(self, texts: List[str]) -> None:
        total = sum(len(t) for t in texts)
        if total > self.max_chars:
            what = "the text has" if len(texts) == 1 else f"the {len(texts)} texts have"
            raise ServiceError(413, "too_long", f"{what} {total} characters; this service accepts at most "
                                                f"{self.max_chars} per request (serve --max-chars)")

    def records(self, ids: List[str], texts: List[str]) -> List[Dict[str, Any]]:
        from ..engines import analyze_batch

        batch = [(i, InputDoc(doc_id, None, text)) for i, (doc_id, text) in enumerate(zip(ids, texts))]
        with self.lock, single_torch_thread():
            results = analyze_batch(self.nlp, batch, self.info)
        return [record for _, record, _ in results]


def build_generator(config: Union[str, Path]) -> Any:
    """The ``rhetoric_generator`` of a config file's
    ``[components.rhetoric_generator]`` block, on a blank pipeline of its
    own (so the analysis pipeline is unchanged)."""
    import spacy

    from ..pipeline import _generator_config

    return spacy.blank("zh").add_pipe("rhetoric_generator", config=_generator_config(Path(config)))


def secret_values(generator: Any = None) -> List[str]:
    """Values that must never appear in an answer or a log line: those of the
    environment variables named like secrets and of the backend's key."""
    key_env = getattr(getattr(generator, "backend", None), "api_key_env", None)
    return environment_secrets([key_env])


def redact(text: str, generator: Any = None) -> str:
    """``text`` without any form of any secret (:mod:`spacy_rhetoric.llm.redaction`)."""
    return redact_secrets(text, secret_values(generator))


# --- the app ---------------------------------------------------------------------------


def create_app(
    nlp_or_path: Union[Language, str, Path],
    *,
    generator_config: Optional[Union[str, Path]] = None,
    generator: Any = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> FastAPI:
    """The FastAPI app (module docstring) over a loaded pipeline or a
    pipeline name/folder (loaded here, once).

    generator_config: config file with ``[components.rhetoric_generator]``
    (enables ``/suggest``); generator: an already built generator component
    instead. Without either, a ``rhetoric_generator`` in the pipeline is
    used for ``/suggest`` (and disabled for the analysis); else ``/suggest``
    answers 503.
    """
    nlp = load_pipeline(str(nlp_or_path)) if isinstance(nlp_or_path, (str, Path)) else nlp_or_path
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    if "rhetoric_generator" in nlp.pipe_names:
        own = nlp.get_pipe("rhetoric_generator")
        nlp.disable_pipe("rhetoric_generator")
        generator = generator or (None if generator_config else own)
    if generator is None and generator_config is not None:
        generator = build_generator(generator_config)
    analyzer = Analyzer(nlp, max_chars)
    gen_lock = _generator_lock(generator)
    if generator is not None and generator.cfg.get("verify", True):
        # verify with the pipeline this service analyses with, behind its lock
        generator.set_analyser(lambda texts: analyzer.records([f"candidate-{i}" for i in range(len(texts))], texts))

    app = FastAPI(
        title="spacy-rhetoric",
        description="Rhetorical devices in Chinese essays: the analysis records of `rhetoric analyze` "
                    f"(schema {SCHEMA}), a page at /, and rewrite suggestions.",
        version=analyzer.info.get("version") or "0",
    )
    app.state.analyzer = analyzer
    app.state.generator = generator
    # outermost first: the body limit, then the catch-all for unexpected errors
    app.add_middleware(CatchAllMiddleware, generator=generator)
    app.add_middleware(BodyLimitMiddleware, max_bytes=24 * max_chars + (1 << 20))
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    @app.exception_handler(ServiceError)
    def _service_error(request: Request, err: ServiceError) -> JSONResponse:
        return error_response(err.status, err.type, redact(err.message, generator), **err.extra)

    @app.exception_handler(RequestValidationError)
    def _validation_error(request: Request, err: RequestValidationError) -> JSONResponse:
        detail = [{"loc": list(e.get("loc", ())), "msg": redact(_message_of(e), generator), "type": e.get("type")}
                  for e in err.errors()]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request", "type": None}
        where = "" if first["type"] == "json_invalid" else ".".join(str(x) for x in first["loc"] if x != "body")
        message = f"{where}: {first['msg']}" if where else first["msg"]
        return error_response(422, "invalid_request", message, detail=detail)

    @app.exception_handler(StarletteHTTPException)
    def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return error_response(err.status_code, kind, str(err.detail), headers=getattr(err, "headers", None))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(static_text("index.html"))

    @app.get("/health")
    def health() -> Dict[str, Any]:
        """Liveness and what is loaded."""
        return {"status": "ok", "model": analyzer.info, "pipeline": list(nlp.pipe_names),
                "suggest": generator is not None, "max_chars": analyzer.max_chars, "schema": SCHEMA}

    @app.post("/analyze")
    def analyze(request: AnalyzeRequest) -> Any:
        """The analysis record of ``text``, or the records of ``texts``."""
        if request.text is not None:
            texts, ids = [request.text], [request.id or "text"]
        else:
            texts = list(request.texts or [])
            ids = list(request.ids) if request.ids is not None else [f"text-{i}" for i in range(1, len(texts) + 1)]
        analyzer.check_size(texts)
        records = analyzer.records(ids, texts) if texts else []
        if request.text is not None:
            record = records[0]
            if "error" in record:
                record["error"]["message"] = redact(record["error"]["message"], generator)
                logger.error("analysis failed: %s", record["error"]["message"])
                return JSONResponse(record, status_code=500)
            return record
        return records

    @app.post("/render")
    def render(record: Dict[str, Any] = Body(..., description="An analysis record (what /analyze returns)")) -> Dict[str, str]:
        """The HTML fragment the page shows for an analysis record."""
        text = record.get("text")
        if "error" not in record and not isinstance(text, str):
            raise ServiceError(422, "invalid_request", 'not an analysis record: "text" must be a string')
        analyzer.check_size([text or ""])
        try:
            return {"html": render_record(record)}
        except (TypeError, ValueError, AttributeError, KeyError) as err:
            raise ServiceError(422, "invalid_request", f"not an analysis record: {type(err).__name__}: {err}") from None

    @app.post("/suggest")
    def suggest(request: SuggestRequest) -> Dict[str, Any]:
        """Rewrite suggestions for one sentence of an essay (CERD RG)."""
        if generator is None:
            raise ServiceError(503, "generator_unavailable",
                               "no generator configured: start the service with --generator-config FILE "
                               "(a config with a [components.rhetoric_generator] block naming an LLM backend)")
        analyzer.check_size([request.text])
        record = analyzer.records(["text"], [request.text])[0]
        if "error" in record:
            raise ServiceError(500, "analysis_error", record["error"]["message"])
        sentences = record["sentences"]
        if request.sentence >= len(sentences):
            raise ServiceError(422, "invalid_request", f"sentence {request.sentence} out of range: "
                                                       f"the text has {len(sentences)} sentences")
        sent = sentences[request.sentence]
        obj = (request.object or "").strip() or _object_of(record, sent, request.rhetoric)
        if not obj:
            raise ServiceError(422, "no_object", f"no {REQUEST_OBJECT[request.rhetoric]} found in sentence "
                                                 f"{request.sentence}; give \"object\"")
        limit = generator.cfg.get("max_sentence_chars", 300)
        if len(sent["text"].strip()) > limit:
            raise ServiceError(422, "too_long", f"sentence {request.sentence} has more than {limit} characters "
                                                "(the generator's max_sentence_chars)")
        context = [s["text"] for s in sentences[: request.sentence]]
        original = sent["text"].strip() if generator.cfg.get("rewrite", True) else None
        try:
            with gen_lock:
                result = generator.suggest(context, request.rhetoric, obj, request.n, original=original,
                                           weights=request.weights, time_budget=request.time_budget)
        except ValueError as err:
            raise ServiceError(422, "invalid_request", str(err)) from None
        candidates = result.candidates
        good = [{k: c.to_dict()[k] for k in CANDIDATE_FIELDS} for c in candidates if c.ok]
        failures = [{"raw": redact(c.raw, generator), "error": redact(str(c.error), generator)} for c in candidates if not c.ok]
        answer = {"sentence": request.sentence, "start": sent["start"], "end": sent["end"], "text": sent["text"],
                  "rhetoric": request.rhetoric, "object": obj, "candidates": good, "failures": failures,
                  "n_drawn": result.n_drawn, "n_verified": result.n_verified, "verification": result.verification,
                  "budget_exhausted": result.budget_exhausted, "message": result.message(f"the pipeline {analyzer.info.get('name') or ''}".strip())}
        if not good and failures:
            logger.warning("suggest: every answer failed: %s", failures[0]["error"])
            raise ServiceError(502, "generator_failed", f"the generator's backend failed: {failures[0]['error']}",
                               failures=failures)
        return answer

    return app


def _message_of(error: Dict[str, Any]) -> str:
    """A validation error's message, the input never quoted."""
    msg = str(error.get("msg", ""))
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error")
        return f"malformed JSON{f' ({reason})' if reason else ''}"
    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg


def _generator_lock(generator: Any) -> Any:
    if generator is None:
        return nullcontext()
    from ..llm.openai_compatible import OpenAICompatibleBackend

    return nullcontext() if isinstance(getattr(generator, "backend", None), OpenAICompatibleBackend) else threading.Lock()


def _object_of(record: Dict[str, Any], sent: Dict[str, Any], rhetoric: str) -> Optional[str]:
    label = REQUEST_OBJECT.get(rhetoric)
    for comp in record["components"]:
        if comp["label"] == label and sent["start"] <= comp["start"] and comp["end"] <= sent["end"]:
            return comp["text"]
    return None


def error_response(status: int, type: str, message: str, headers: Optional[Dict[str, str]] = None,
                   **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"type": type, "message": message}, **extra}, status_code=status, headers=headers)


# --- ASGI middleware -----------------------------------------------------------------


class BodyLimitMiddleware:
    """413 before reading a body whose Content-Length is over ``max_bytes``
    (the character limit is checked precisely after parsing)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                response = error_response(413, "too_large", f"request body of {int(length)} bytes; "
                                                            f"this service accepts at most {self.max_bytes}")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CatchAllMiddleware:
    """Any unexpected exception -> 500 ``internal_error`` JSON without a
    traceback; the traceback goes to the log, secrets redacted."""

    def __init__(self, app: Any, generator: Any = None) -> None:
        self.app, self.generator = app, generator

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as err:  # noqa: BLE001 - answered as JSON, logged without secrets
            logger.error("internal error on %s %s:\n%s", scope.get("method"), scope.get("path"),
                         redact("".join(traceback.format_exception(err)), self.generator))
            if not started:
                response = error_response(500, "internal_error",
                                          f"internal error ({type(err).__name__}); see the service log")
                await response(scope, receive, send)


# --- running it ------------------------------------------------------------------------


def run(
    model: Union[str, Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    generator_config: Optional[Union[str, Path]] = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    log_level: str = "info",
    echo: Any = print,
) -> None:
    """Load the pipeline, bind ``host:port`` (port 0: a free port) and serve
    until interrupted. ``echo`` gets the start-up lines (the first one names
    the URL)."""
    import socket

    import uvicorn

    app = create_app(model, generator_config=generator_config, max_chars=max_chars)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    info = app.state.analyzer.info
    echo(f"serving {info['name']} {info['version']} at http://{url_host}:{bound}/ "
         f"(API docs at /docs; suggestions {'on' if app.state.generator is not None else 'off'}; "
         f"max {max_chars} characters per request)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        echo(f"warning: listening on {host}: anyone who can reach this machine can use the service "
             "(it has no authentication)")
    config = uvicorn.Config(app, host=host, port=bound, log_level=log_level, access_log=True, timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
