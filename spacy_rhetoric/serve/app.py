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
    :func:`spacy_rhetoric.analysis.records.doc_to_record`; ``path`` and ``encoding``
    null, ``id`` default ``"text"``), or ``{"texts": [str], "ids"?: [str]}``
    -> a JSON array of records (ids default ``text-1``, ``text-2``, ...).
    Empty or whitespace text gives the empty analysis. A text the pipeline
    fails on gets the error record of ``analyze`` (``"error": {"type":
    "analysis_error", ...}``): status 500 for ``text``, inside the array
    (status 200) for ``texts``.
``POST /render``
    an analysis record -> ``{"html": fragment}``, the rendering of
    :mod:`spacy_rhetoric.analysis.render` that the page shows and the static
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
422 for malformed JSON, a missing or wrongly typed field, a number that is
not finite or a string with a lone surrogate anywhere in the body, both or
neither of ``text``/``texts``, an out-of-range sentence or a missing
object; 413 when the characters of one request (``text``, or all ``texts``
together) exceed ``max_chars``, its texts ``max_texts``, a record's spans
``max_spans`` (``/render``), or its body is far larger than that could need
(refused once that much arrived, chunked or not); 401 without the access
token (``--auth-token-env``), 429 over a client's rate
(:mod:`spacy_rhetoric.serve.limits`); 404/405 for unknown paths/methods;
503 and 502 as above (503 also when the generator cannot run now: its
server unreachable, its model not loading); 500 ``internal_error`` for
anything unexpected, whose traceback goes to the log (with secrets
redacted), never to the client. Every answer carries the security headers
of :class:`~spacy_rhetoric.serve.limits.SecurityHeadersMiddleware`.

Worker model. spaCy's ``Language`` is not safe to call from two threads at
once, so the service loads the pipeline once and guards it with one lock:
endpoints are plain ``def`` functions that FastAPI runs in its threadpool
(up to 40 threads), so requests are received, validated, serialised and
answered concurrently, while the pipeline itself analyses one request at a
time (a ``texts`` request as one ``nlp.pipe`` batch), torch on one thread
(a transformer encoder's ``cpu_threads`` apply in the main thread only:
:func:`spacy_rhetoric.runtime.threads.encoder_threads`).
Throughput is therefore one pipeline's; to use more cores, run several
``serve`` processes (each loads its own pipeline, about 0.75 GiB) behind a
proxy, or use ``rhetoric analyze --engine ray`` for batches. Generation
(``/suggest``) runs outside the pipeline lock: requests to an
OpenAI-compatible server run concurrently (the backend bounds its own
concurrency); a local Transformers backend is guarded by a lock of its own.

Secrets: the generator config names the API key *variable*
(``api_key_env``), and ``--auth-token-env`` the access token's; their values
are read from the environment, never from the command line. The service
replaces the value of those variables, and of any environment variable
whose name says it holds a secret (:mod:`spacy_rhetoric.llm.redaction`), by
``***`` in every error it returns or logs.
"""
from __future__ import annotations

import base64
import hashlib
import ipaddress
import logging
import math
import os
import re
import threading
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, model_validator
from spacy.language import Language
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..analysis.io import InputDoc
from ..analysis.loading import load_pipeline
from ..analysis.records import SCHEMA, model_info, single_torch_thread
from ..analysis.render import render_record, static_text
from ..llm.redaction import environment_secrets
from ..llm.redaction import redact as redact_secrets
from ..taxonomy import REQUEST_OBJECT
from .limits import (PAGE_CSP, BodyLimitMiddleware, RateLimitMiddleware, SecurityHeadersMiddleware,
                     TokenAuthMiddleware, error_response, header_timeout_protocol)

logger = logging.getLogger("spacy_rhetoric.serve")

DEFAULT_MAX_CHARS = 100_000
#: Most texts one ``/analyze`` request may carry.
DEFAULT_MAX_TEXTS = 100
#: Most spans (sentences + parallelism branches + components) of a record
#: ``/render`` draws.
DEFAULT_MAX_SPANS = 20_000
#: Requests per second and burst of one client address (0: no limit).
DEFAULT_RATE_LIMIT = 10.0
DEFAULT_RATE_BURST = 60
#: uvicorn's settings (``rhetoric serve`` options of the same names).
DEFAULT_TIMEOUT_KEEP_ALIVE = 5
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_LIMIT_CONCURRENCY = 200
DEFAULT_MAX_HEADER_BYTES = 16 * 1024
STATIC_DIR = Path(__file__).parent / "static"
#: Errors of a generator's backend that mean it cannot be reached (503), as
#: the OpenAI-compatible backend words them, rather than that it answered
#: with an error (502).
_UNREACHABLE = re.compile(r"^(connection error|timeout after)")


class ServiceError(Exception):
    """An error answered as ``{"error": {"type", "message"}}`` with ``status``."""

    def __init__(self, status: int, type: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.type, self.message, self.extra = status, type, message, extra


class GeneratorNotReady(ValueError):
    """The generator names local files that do not exist (a model, a LoRA
    adapter, a KenLM model); the message, one line, names the project
    command that builds each."""


# --- request bodies ----------------------------------------------------------------


def json_problem(value: Any) -> Optional[str]:
    """Where a parsed JSON value holds a string that is not valid Unicode (a
    lone surrogate, which no UTF-8 answer can carry) or a number that is not
    finite (``1e400``, ``NaN``): ``"text: ..."``; None when it holds none.
    Walks iteratively, so nesting depth costs no stack."""
    todo: List[Tuple[Tuple[Any, ...], Any]] = [((), value)]
    while todo:
        loc, item = todo.pop()
        where = ".".join(str(x) for x in loc) or "body"
        if isinstance(item, str):
            try:
                item.encode("utf8")
            except UnicodeEncodeError as err:
                return f"{where}: a lone surrogate at character {err.start} is not valid Unicode text"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{where}: not a finite number"
        elif isinstance(item, dict):
            for key, sub in item.items():
                try:
                    key.encode("utf8")
                except UnicodeEncodeError:
                    return f"{where}: a key with a lone surrogate is not valid Unicode text"
                todo.append((loc + (key,), sub))
        elif isinstance(item, list):
            todo.extend((loc + (i,), sub) for i, sub in enumerate(item))
    return None


class _Checked(BaseModel):
    """A request body that holds only valid Unicode and finite numbers
    (:func:`json_problem`): 422 otherwise, never a 500 when the answer is
    written."""

    @model_validator(mode="before")
    @classmethod
    def _valid_json(cls, data: Any) -> Any:
        problem = json_problem(data)
        if problem:
            raise ValueError(problem)
        return data


class AnalyzeRequest(_Checked):
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


class SuggestRequest(_Checked):
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


# What /render reads of a record, typed where the renderer turns a value
# into a number (anything else of the record is passed on untouched).
_Open = ConfigDict(extra="allow")


class _RenderSpan(BaseModel):
    model_config = _Open
    start: Optional[int] = None
    end: Optional[int] = None


class _RenderSentence(_RenderSpan):
    coarse: Optional[Dict[str, float]] = None
    form: Optional[Dict[str, float]] = None
    content: Optional[Dict[str, float]] = None


class _RenderComponent(_RenderSpan):
    label: Optional[str] = None
    score: Optional[float] = None


class _RenderUnit(_RenderSpan):
    label: Optional[str] = None
    label_zh: Optional[str] = None


class _RenderParallelism(BaseModel):
    model_config = _Open
    kind: Optional[str] = None
    branches: Optional[List[_RenderSpan]] = None


class _RenderSummary(BaseModel):
    model_config = _Open
    coarse: Optional[Dict[str, float]] = None
    sentences: Optional[float] = None
    clauses: Optional[float] = None
    parallelisms: Optional[float] = None
    branches: Optional[float] = None
    cross_paragraph_parallelisms: Optional[float] = None


class RenderRecord(_Checked):
    """An analysis record as ``/render`` takes it (what ``/analyze``
    returns): ``text`` a string (may be null in an error record), offsets
    integers, scores and counts finite numbers."""

    model_config = _Open
    text: Optional[str] = None
    error: Optional[Dict[str, Any]] = None
    n_chars: Optional[int] = None
    sentences: Optional[List[_RenderSentence]] = None
    parallelisms: Optional[List[_RenderParallelism]] = None
    components: Optional[List[_RenderComponent]] = None
    figurative_units: Optional[List[_RenderUnit]] = None
    summary: Optional[_RenderSummary] = None

    @model_validator(mode="after")
    def _has_text(self) -> "RenderRecord":
        if self.error is None and self.text is None:
            raise ValueError('not an analysis record: "text" must be a string')
        return self

    def n_spans(self) -> int:
        """Sentences + parallelism branches + components + figurative units."""
        branches = sum(len(p.branches or []) for p in self.parallelisms or [])
        return len(self.sentences or []) + branches + len(self.components or []) + len(self.figurative_units or [])


# --- the pipeline and the generator --------------------------------------------------


class Analyzer:
    """The pipeline, loaded once, behind one lock (module docstring)."""

    def __init__(self, nlp: Language, max_chars: int, max_texts: int = DEFAULT_MAX_TEXTS) -> None:
        if max_chars < 1 or max_texts < 1:
            raise ValueError(f"max_chars and max_texts must be >= 1, got {max_chars} and {max_texts}")
        self.nlp = nlp
        self.max_chars = int(max_chars)
        self.max_texts = int(max_texts)
        self.lock = threading.Lock()
        self.info = model_info(nlp)
        # a text up to max_chars must reach the pipeline
        nlp.max_length = max(nlp.max_length, self.max_chars + 1)

    def check_size(self, texts: List[str]) -> None:
        """413 for more than ``max_texts`` texts or ``max_chars`` characters
        in all, before the pipeline's lock is taken."""
        if len(texts) > self.max_texts:
            raise ServiceError(413, "too_many_texts", f"{len(texts)} texts; this service accepts at most "
                                                      f"{self.max_texts} per request (serve --max-texts)")
        total = sum(len(t) for t in texts)
        if total > self.max_chars:
            what = "the text has" if len(texts) == 1 else f"the {len(texts)} texts have"
            raise ServiceError(413, "too_long", f"{what} {total} characters; this service accepts at most "
                                                f"{self.max_chars} per request (serve --max-chars)")

    def records(self, ids: List[str], texts: List[str]) -> List[Dict[str, Any]]:
        from ..analysis.engines import analyze_batch

        batch = [(i, InputDoc(doc_id, None, text)) for i, (doc_id, text) in enumerate(zip(ids, texts))]
        with self.lock, single_torch_thread():
            results = analyze_batch(self.nlp, batch, self.info)
        return [record for _, record, _ in results]


def build_generator(config: Union[str, Path]) -> Any:
    """The ``rhetoric_generator`` of a config file's
    ``[components.rhetoric_generator]`` block, on a blank pipeline of its
    own (so the analysis pipeline is unchanged)."""
    import spacy

    from ..components.rhetoric_generator import read_generator_config

    return spacy.blank("zh").add_pipe("rhetoric_generator", config=read_generator_config(Path(config)))


def _project_outputs(project_file: Path) -> List[Tuple[str, str]]:
    """``(output path, command)`` of every command of a spaCy project file."""
    import srsly

    try:
        project = srsly.read_yaml(project_file)
    except (OSError, ValueError):
        return []
    return [(str(out).rstrip("/"), cmd.get("name", "?")) for cmd in project.get("commands") or []
            for out in cmd.get("outputs") or [] if isinstance(out, str)]


def missing_generator_files(generator: Any, project_file: Optional[Path] = None) -> List[str]:
    """What a generator needs on disk and does not find: one
    ``"PATH (build it: spacy project run COMMAND)"`` per missing file or
    folder, the command being the one of ``project_file`` (default
    ``./project.yml``, where relative paths of a config are resolved) that
    lists it, or a path beneath it, as an output.

    Looked at: the ``adapter_path`` of a Transformers backend (the
    ``model`` block) and the ``verifier`` block's ``kenlm_path`` (always
    local), and the backend's
    ``model_path`` when it is a project output, absolute or ``./``-relative
    (anything else may be a Hugging Face cache name)."""
    outputs = _project_outputs(project_file or Path.cwd() / "project.yml")

    def command_for(path: str) -> Optional[str]:
        norm = os.path.normpath(path)
        for out, cmd in outputs:
            out = os.path.normpath(out)
            if norm == out or out.startswith(norm + os.sep) or norm.startswith(out + os.sep):
                return cmd
        return None

    backend = getattr(generator, "backend", None)
    wanted: List[Tuple[str, bool]] = []  # (path, only when it is clearly a local path)
    if getattr(backend, "model_path", None):
        wanted.append((str(backend.model_path), True))
    if getattr(backend, "adapter_path", None):
        wanted.append((str(backend.adapter_path), False))
    kenlm = (getattr(generator, "cfg", None) or {}).get("kenlm_path")
    if kenlm:
        wanted.append((str(kenlm), False))
    missing = []
    for path, only_local in wanted:
        if Path(path).exists():
            continue
        command = command_for(path)
        if only_local and command is None and not (os.path.isabs(path) or path.startswith((".", "~"))):
            continue
        missing.append(f"{path} ({'build it: spacy project run ' + command if command else 'not found'})")
    return missing


def secret_values(generator: Any = None, extra_names: Tuple[Optional[str], ...] = ()) -> List[str]:
    """Values that must never appear in an answer or a log line: those of
    the environment variables named like secrets, of the generator
    backend's ``api_key_env`` and of ``extra_names`` (the auth token's)."""
    key_env = getattr(getattr(generator, "backend", None), "api_key_env", None)
    return environment_secrets((key_env, *extra_names))


def redact(text: str, generator: Any = None, extra_names: Tuple[Optional[str], ...] = ()) -> str:
    """``text`` with every secret (:func:`secret_values`) replaced by ``***``
    (:func:`spacy_rhetoric.llm.redaction.redact`)."""
    return redact_secrets(text, secret_values(generator, extra_names))


def _inline_script_hashes(html: str) -> List[str]:
    """CSP source expressions (``'sha256-...'``) of the inline scripts of a page."""
    return [f"'sha256-{base64.b64encode(hashlib.sha256(m.group(1).encode('utf8')).digest()).decode()}'"
            for m in re.finditer(r"<script>(.*?)</script>", html, flags=re.DOTALL)]


# --- the app ---------------------------------------------------------------------------


def create_app(
    nlp_or_path: Union[Language, str, Path],
    *,
    generator_config: Optional[Union[str, Path]] = None,
    generator: Any = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_texts: int = DEFAULT_MAX_TEXTS,
    max_spans: int = DEFAULT_MAX_SPANS,
    auth_token: Optional[str] = None,
    auth_token_env: Optional[str] = None,
    rate_limit: float = DEFAULT_RATE_LIMIT,
    rate_burst: int = DEFAULT_RATE_BURST,
    project_file: Optional[Path] = None,
) -> FastAPI:
    """The FastAPI app (module docstring) over a loaded pipeline or a
    pipeline name/folder (loaded here, once).

    generator_config: config file with ``[components.rhetoric_generator]``
    (enables ``/suggest``); generator: an already built generator component
    instead. Without either, a ``rhetoric_generator`` in the pipeline is
    used for ``/suggest`` (and disabled for the analysis); else ``/suggest``
    answers 503. max_chars, max_texts: most characters (all texts together)
    and texts of one request (413 above); max_spans: most spans of a record
    ``/render`` draws (413 above). auth_token: the API then needs
    ``Authorization: Bearer <auth_token>`` (its variable's name
    ``auth_token_env`` only names it for redaction); rate_limit,
    rate_burst: requests per second and burst per client address (0: no
    limit). Raises ``ValueError`` for a limit < 1 and
    :class:`GeneratorNotReady` when the generator's local files are missing
    (:func:`missing_generator_files`, with ``project_file``).
    """
    if max_chars < 1 or max_texts < 1 or max_spans < 1:
        raise ValueError(f"max_chars, max_texts and max_spans must be >= 1, got {max_chars}, {max_texts} and {max_spans}")
    if rate_limit < 0:
        raise ValueError(f"rate_limit must be >= 0, got {rate_limit}")
    nlp = load_pipeline(str(nlp_or_path)) if isinstance(nlp_or_path, (str, Path)) else nlp_or_path
    if "rhetoric_generator" in nlp.pipe_names:
        own = nlp.get_pipe("rhetoric_generator")
        nlp.disable_pipe("rhetoric_generator")
        generator = generator or (None if generator_config else own)
    if generator is None and generator_config is not None:
        generator = build_generator(generator_config)
    if generator is not None:
        missing = missing_generator_files(generator, project_file)
        if missing:
            where = f"the generator of {generator_config}" if generator_config else "the generator"
            raise GeneratorNotReady(f"{where} is not ready, suggestions cannot be served: missing "
                                    + "; ".join(missing))
    analyzer = Analyzer(nlp, max_chars, max_texts)
    gen_lock = _generator_lock(generator)
    if generator is not None and generator.cfg.get("verify", True):
        # verify with the pipeline this service analyses with, behind its lock
        generator.set_analyser(lambda texts: analyzer.records([f"candidate-{i}" for i in range(len(texts))], texts))

    def hide(text: str) -> str:
        return redact(text, generator, (auth_token_env,))

    app = FastAPI(
        title="spacy-rhetoric",
        description="Rhetorical devices in Chinese essays: the analysis records of `rhetoric analyze` "
                    f"(schema {SCHEMA}), a page at /, and rewrite suggestions.",
        version=analyzer.info.get("version") or "0",
        docs_url=None, redoc_url=None,
    )
    app.state.analyzer = analyzer
    app.state.generator = generator
    app.state.auth = bool(auth_token)
    docs_html = get_swagger_ui_html(openapi_url="/openapi.json", title="spacy-rhetoric API").body.decode("utf8")
    # Swagger UI comes from its CDN and starts with one inline script, allowed by its hash
    docs_csp = ("default-src 'none'; script-src https://cdn.jsdelivr.net " + " ".join(_inline_script_hashes(docs_html))
                + "; style-src https://cdn.jsdelivr.net 'unsafe-inline'; img-src 'self' data: https://fastapi.tiangolo.com; "
                  "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
    # added innermost first: the catch-all, the token, the rate limit (so
    # that guesses of the token count too), the body limit, and outermost
    # the headers every answer gets
    app.add_middleware(CatchAllMiddleware, hide=hide)
    if auth_token:
        app.add_middleware(TokenAuthMiddleware, token=auth_token)
    if rate_limit > 0:
        app.add_middleware(RateLimitMiddleware, rate=rate_limit, burst=rate_burst)
    app.add_middleware(BodyLimitMiddleware, max_bytes=24 * max_chars + (1 << 20))
    app.add_middleware(SecurityHeadersMiddleware, csp_for=lambda path: docs_csp if path == "/docs" else PAGE_CSP)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    @app.exception_handler(ServiceError)
    def _service_error(request: Request, err: ServiceError) -> JSONResponse:
        return error_response(err.status, err.type, hide(err.message), **err.extra)

    @app.exception_handler(RequestValidationError)
    def _validation_error(request: Request, err: RequestValidationError) -> JSONResponse:
        detail = [{"loc": [_printable(x) for x in e.get("loc", ())], "msg": _printable(hide(_message_of(e))),
                   "type": e.get("type")} for e in err.errors()]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request", "type": None}
        where = "" if first["type"] == "json_invalid" else ".".join(str(x) for x in first["loc"] if x != "body")
        message = f"{where}: {first['msg']}" if where else first["msg"]
        return error_response(422, "invalid_request", message, detail=detail)

    @app.exception_handler(StarletteHTTPException)
    def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(err.status_code, "http_error")
        return error_response(err.status_code, kind, str(err.detail), headers=getattr(err, "headers", None))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(static_text("index.html"))

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(docs_html)

    @app.get("/health")
    def health() -> Dict[str, Any]:
        """Liveness and what is loaded."""
        return {"status": "ok", "model": analyzer.info, "pipeline": list(nlp.pipe_names),
                "suggest": generator is not None, "max_chars": analyzer.max_chars, "max_texts": analyzer.max_texts,
                "auth": bool(auth_token), "schema": SCHEMA}

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
                record["error"]["message"] = hide(record["error"]["message"])
                logger.error("analysis failed: %s", record["error"]["message"])
                return JSONResponse(record, status_code=500)
            return record
        return records

    @app.post("/render")
    def render(record: RenderRecord) -> Dict[str, str]:
        """The HTML fragment the page shows for an analysis record."""
        analyzer.check_size([record.text or ""])
        if record.n_spans() > max_spans:
            raise ServiceError(413, "too_many_spans", f"the record has {record.n_spans()} spans (sentences, "
                                                      f"branches and components); this service draws at most "
                                                      f"{max_spans} (serve --max-spans)")
        try:
            return {"html": render_record(record.model_dump(exclude_unset=True))}
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as err:
            raise ServiceError(422, "invalid_request", f"not an analysis record: {type(err).__name__}: {err}") from None

    @app.post("/suggest")
    def suggest(request: SuggestRequest) -> Dict[str, Any]:
        """Rewrite suggestions for one sentence of an essay (CERD RG)."""
        if generator is None:
            raise ServiceError(503, "generator_unavailable",
                               "no generator configured: start the service with --generator-config FILE "
                               "(a config with a [components.rhetoric_generator] block and its model block naming an LLM backend)")
        from ..llm.verify import check_weights

        analyzer.check_size([request.text])
        try:
            check_weights({**generator.cfg.get("weights", {}), **(request.weights or {})})
        except ValueError as err:
            raise ServiceError(422, "invalid_request", f"weights: {err}") from None
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
        except (OSError, ValueError, RuntimeError, ImportError) as err:
            # the request was checked above: what fails here is the generator itself (a model that
            # does not load, a backend that does not start), not the request
            logger.error("suggest: the generator failed: %s: %s", type(err).__name__, hide(str(err)))
            raise ServiceError(503, "generator_unavailable", "suggestions are not available right now: the "
                                                             "generator could not run (see the service log)") from None
        candidates = result.candidates
        good = [{k: c.to_dict()[k] for k in CANDIDATE_FIELDS} for c in candidates if c.ok]
        failures = [{"raw": hide(c.raw), "error": hide(str(c.error))} for c in candidates if not c.ok]
        answer = {"sentence": request.sentence, "start": sent["start"], "end": sent["end"], "text": sent["text"],
                  "rhetoric": request.rhetoric, "object": obj, "candidates": good, "failures": failures,
                  "n_drawn": result.n_drawn, "n_verified": result.n_verified, "verification": result.verification,
                  "budget_exhausted": result.budget_exhausted, "message": result.message(f"the pipeline {analyzer.info.get('name') or ''}".strip())}
        if not good and failures:
            logger.warning("suggest: every answer failed: %s", failures[0]["error"])
            if all(_UNREACHABLE.match(f["error"]) for f in failures):
                raise ServiceError(503, "generator_unavailable", "suggestions are not available right now: the "
                                                                 "generator's server cannot be reached "
                                                                 f"({failures[0]['error']})")
            raise ServiceError(502, "generator_failed", f"the generator's backend failed: {failures[0]['error']}",
                               failures=failures)
        return answer

    return app


def _printable(value: Any) -> Any:
    """A location or message part that a UTF-8 answer can carry (a lone
    surrogate becomes ``?``)."""
    if isinstance(value, str):
        return value.encode("utf8", "replace").decode("utf8")
    return value


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


# --- ASGI middleware -----------------------------------------------------------------


class CatchAllMiddleware:
    """Any unexpected exception -> 500 ``internal_error`` JSON without a
    traceback; the traceback goes to the log, secrets redacted (``hide``)."""

    def __init__(self, app: Any, hide: Any = lambda text: text) -> None:
        self.app, self.hide = app, hide

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
                         self.hide("".join(traceback.format_exception(err))))
            if not started:
                response = error_response(500, "internal_error",
                                          f"internal error ({type(err).__name__}); see the service log")
                await response(scope, receive, send)


# --- running it ------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_auth_token(name: str) -> str:
    """The token in environment variable ``name``, stripped. Raises
    ``ValueError`` (never quoting a value) when it is unset, blank, or holds
    whitespace or control characters inside."""
    from ..llm.redaction import clean_secret

    try:
        token = clean_secret(os.environ.get(name))
    except ValueError:
        raise ValueError(f"--auth-token-env {name}: the token holds whitespace or a control character") from None
    if not token:
        raise ValueError(f"--auth-token-env {name}: the environment variable {name} is not set or empty")
    return token


def run(
    model: Union[str, Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    generator_config: Optional[Union[str, Path]] = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_texts: int = DEFAULT_MAX_TEXTS,
    max_spans: int = DEFAULT_MAX_SPANS,
    auth_token_env: Optional[str] = None,
    rate_limit: float = DEFAULT_RATE_LIMIT,
    rate_burst: int = DEFAULT_RATE_BURST,
    timeout_keep_alive: int = DEFAULT_TIMEOUT_KEEP_ALIVE,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    limit_concurrency: Optional[int] = DEFAULT_LIMIT_CONCURRENCY,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    log_level: str = "info",
    echo: Any = print,
) -> None:
    """Load the pipeline, bind ``host:port`` (port 0: a free port) and serve
    until interrupted. ``echo`` gets the start-up lines (the first one names
    the URL). auth_token_env: the *name* of the environment variable
    holding the access token (never the token itself). timeout_keep_alive,
    limit_concurrency: uvicorn's settings; header_timeout: seconds a
    connection may take to send a request's headers
    (:class:`~spacy_rhetoric.serve.limits.HeaderTimeoutH11Protocol`);
    max_header_bytes: h11's ``max_incomplete_event_size`` (431 above).
    Raises ``ValueError`` for a bad setting, an unset token variable, or a
    generator whose files are missing (:class:`GeneratorNotReady`)."""
    import socket

    import uvicorn

    token = read_auth_token(auth_token_env) if auth_token_env else None
    if timeout_keep_alive < 1 or max_header_bytes < 1024 or (limit_concurrency is not None and limit_concurrency < 1):
        raise ValueError("timeout_keep_alive and limit_concurrency must be >= 1, max_header_bytes >= 1024")
    header_timeout_protocol(header_timeout)  # checks it before the pipeline is loaded
    app = create_app(model, generator_config=generator_config, max_chars=max_chars, max_texts=max_texts,
                     max_spans=max_spans, auth_token=token, auth_token_env=auth_token_env, rate_limit=rate_limit,
                     rate_burst=rate_burst)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    url_host = f"[{host}]" if ":" in host else host
    info = app.state.analyzer.info
    echo(f"serving {info['name']} {info['version']} at http://{url_host}:{bound}/ "
         f"(API docs at /docs; suggestions {'on' if app.state.generator is not None else 'off'}; "
         f"max {max_chars} characters and {max_texts} texts per request; "
         f"{'token required' if token else 'no token'})")
    if not is_loopback(host) and not token:
        echo(f"warning: listening on {host} without authentication: anyone who can reach this machine can use "
             "the service; set a token with --auth-token-env NAME")
    config = uvicorn_config(app, host, bound, timeout_keep_alive=timeout_keep_alive, header_timeout=header_timeout,
                            limit_concurrency=limit_concurrency, max_header_bytes=max_header_bytes, log_level=log_level)
    uvicorn.Server(config).run(sockets=[sock])


def uvicorn_config(
    app: Any,
    host: str,
    port: int,
    *,
    timeout_keep_alive: int = DEFAULT_TIMEOUT_KEEP_ALIVE,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    limit_concurrency: Optional[int] = DEFAULT_LIMIT_CONCURRENCY,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    log_level: str = "info",
) -> Any:
    """The ``uvicorn.Config`` of :func:`run`: the h11 protocol with the
    header timeout, uvicorn's keep-alive and concurrency limits, h11's
    header size limit."""
    import uvicorn

    if timeout_keep_alive < 1 or max_header_bytes < 1024 or (limit_concurrency is not None and limit_concurrency < 1):
        raise ValueError("timeout_keep_alive and limit_concurrency must be >= 1, max_header_bytes >= 1024")
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=True, timeout_graceful_shutdown=5,
                          http=header_timeout_protocol(header_timeout), timeout_keep_alive=timeout_keep_alive,
                          limit_concurrency=limit_concurrency, h11_max_incomplete_event_size=max_header_bytes)
