"""An in-process fake OpenAI-compatible chat-completions server for tests.

Serves ``POST /v1/chat/completions`` on 127.0.0.1 at an ephemeral port from a
daemon thread. Answers are scripted: each request takes the next
:class:`Reply` from ``script`` (then ``default``, which may also be a
function of the request body). Bounded: it answers at most ``max_requests``
requests, reads at most ``MAX_BODY_BYTES`` per request, and shuts itself down
after ``lifetime_s`` seconds even if a test forgets to stop it.

Usage::

    from fake_openai import FakeOpenAIServer, valid, malformed, slow, status

    with FakeOpenAIServer([status(429), valid('{"generation": "..."}')]) as srv:
        backend = OpenAICompatibleBackend(srv.base_url, "fake", ...)
        ...
        srv.requests      # list of RecordedRequest(headers, body)
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

MAX_BODY_BYTES = 1_000_000


@dataclass
class Reply:
    """One scripted answer.

    contents: message contents of the choices (repeated/cut to the ``n`` the
        request asks for, unless ``ignore_n``).
    status: HTTP status; non-200 replies send ``error_body`` instead.
    delay: seconds to wait before answering (to trigger client timeouts).
    headers: extra response headers (e.g. ``Retry-After``).
    raw_body: if set, sent verbatim as the response body (malformed JSON).
    logprobs: per-token log-probabilities reported for every choice.
    ignore_n: answer with exactly ``len(contents)`` choices, like servers
        that do not support ``n``.
    """

    contents: Sequence[str] = ("",)
    status: int = 200
    delay: float = 0.0
    headers: Dict[str, str] = field(default_factory=dict)
    raw_body: Optional[bytes] = None
    error_body: str = '{"error": {"message": "scripted error"}}'
    logprobs: Optional[Sequence[float]] = None
    ignore_n: bool = False


def valid(*contents: str, logprobs: Optional[Sequence[float]] = None, ignore_n: bool = False) -> Reply:
    """A 200 answer whose choices carry ``contents``."""
    return Reply(contents=contents or ('{"generation": ""}',), logprobs=logprobs, ignore_n=ignore_n)


def malformed(content: str = "Sure! Here is a sentence: 月亮像小船") -> Reply:
    """A 200 answer whose message content is not the requested JSON."""
    return Reply(contents=(content,))


def bad_body(body: bytes = b"{not json") -> Reply:
    """A 200 answer whose HTTP body is not JSON at all."""
    return Reply(raw_body=body)


def slow(seconds: float, *contents: str) -> Reply:
    """A valid answer sent after ``seconds``."""
    return Reply(contents=contents or ('{"generation": "slow"}',), delay=seconds)


def status(code: int, retry_after: Optional[float] = None, body: Optional[str] = None) -> Reply:
    """An error answer with HTTP ``code`` (429, 500, 401, ...)."""
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    reply = Reply(status=code, headers=headers)
    if body is not None:
        reply.error_body = body
    return reply


@dataclass
class RecordedRequest:
    path: str
    headers: Dict[str, str]
    body: Any
    time: float


Responder = Callable[[Any], Reply]


class FakeOpenAIServer:
    """Context manager running the fake server (see module docstring)."""

    def __init__(
        self,
        script: Sequence[Reply] = (),
        *,
        default: Union[Reply, Responder, None] = None,
        max_requests: int = 200,
        lifetime_s: float = 60.0,
    ) -> None:
        self._script: List[Reply] = list(script)
        self._default = default if default is not None else valid('{"generation": "默认回答"}')
        self.max_requests = max_requests
        self.lifetime_s = lifetime_s
        self.requests: List[RecordedRequest] = []
        #: Most requests that were being answered at the same time.
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[threading.Timer] = None

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "FakeOpenAIServer":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- request handling -------------------------------------------------
    def _next_reply(self, body: Any) -> Optional[Reply]:
        with self._lock:
            if len(self.requests) > self.max_requests:
                return None
            if self._script:
                return self._script.pop(0)
        return self._default(body) if callable(self._default) else self._default

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            handler.send_error(413, "request too large")
            return
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        with self._lock:
            self.requests.append(
                RecordedRequest(handler.path, dict(handler.headers.items()), body, time.time())
            )
        if not handler.path.endswith("/chat/completions") or body is None:
            handler.send_error(404 if body is not None else 400)
            return
        reply = self._next_reply(body)
        if reply is None:
            handler.send_error(503, "fake server request budget exhausted")
            return
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        self._reply(handler, reply, body)

    def _reply(self, handler: BaseHTTPRequestHandler, reply: Reply, body: Dict[str, Any]) -> None:
        # a request stops being in flight once its answer is ready, before it
        # is sent: the client may send its next request as soon as it has
        # read this one, while this handler thread is still returning
        try:
            if reply.delay:
                time.sleep(reply.delay)
        finally:
            with self._lock:
                self._in_flight -= 1
        if reply.raw_body is not None:
            self._send(handler, 200, reply.raw_body, reply.headers)
        elif reply.status != 200:
            self._send(handler, reply.status, reply.error_body.encode("utf-8"), reply.headers)
        else:
            payload = self._completion_payload(reply, body)
            self._send(handler, 200, json.dumps(payload, ensure_ascii=False).encode("utf-8"), reply.headers)

    @staticmethod
    def _completion_payload(reply: Reply, body: Dict[str, Any]) -> Dict[str, Any]:
        n = int(body.get("n") or 1)
        contents = list(reply.contents)
        if not reply.ignore_n:
            contents = [contents[i % len(contents)] for i in range(n)]
        choices = []
        for i, text in enumerate(contents):
            choice: Dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            if reply.logprobs is not None and body.get("logprobs"):
                choice["logprobs"] = {
                    "content": [{"token": f"t{j}", "logprob": lp} for j, lp in enumerate(reply.logprobs)]
                }
            choices.append(choice)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model", "fake"),
            "choices": choices,
            "usage": {"completion_tokens": sum(len(c) for c in contents)},
        }

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, data: bytes, headers: Dict[str, str]) -> None:
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
