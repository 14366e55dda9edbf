"""What keeps one careless or hostile client from taking ``rhetoric serve``
down for the others: ASGI middleware for the app and one uvicorn protocol.

- :class:`BodyLimitMiddleware`: a request body is refused (413) as soon as
  more than ``max_bytes`` of it arrived, whether it declared a
  ``Content-Length`` or came chunked; nothing past the limit is read.
- :class:`TokenAuthMiddleware`: ``Authorization: Bearer <token>`` on the
  API (``hmac.compare_digest``); 401 without it.
- :class:`RateLimitMiddleware`: a token bucket per client address; 429
  with ``Retry-After`` when it is empty.
- :class:`SecurityHeadersMiddleware`: Content-Security-Policy (no inline
  script), ``X-Content-Type-Options``, ``X-Frame-Options``,
  ``Referrer-Policy`` on every answer.
- :class:`HeaderTimeoutH11Protocol`: uvicorn's h11 protocol closing a
  connection whose request line and headers are not complete within
  ``header_timeout`` seconds of its start (or of the previous answer).
  uvicorn's ``timeout_keep_alive`` runs only between requests and is reset
  by every byte received, so a client that trickles a header, or connects
  and sends nothing, would otherwise hold its connection for ever.

Every refusal is the service's JSON error (``{"error": {"type",
"message"}}``).
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import math
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

import h11
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

Scope = Dict[str, Any]
logger = logging.getLogger("spacy_rhetoric.serve")

#: Paths anyone may fetch without the token: the page and its files, the
#: liveness check, the API description (the page needs them to ask for it).
OPEN_PATHS = ("/", "/health", "/docs", "/docs/oauth2-redirect", "/openapi.json")
OPEN_PREFIXES = ("/static/",)


def error_response(status: int, type: str, message: str, headers: Optional[Dict[str, str]] = None,
                   **extra: Any) -> JSONResponse:
    """The service's error answer: ``{"error": {"type", "message"}, **extra}``."""
    return JSONResponse({"error": {"type": type, "message": message}, **extra}, status_code=status, headers=headers)


def is_open_path(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


# --- the request body ------------------------------------------------------------------


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` once a body passes the limit; FastAPI lets an
    ``HTTPException`` through its body parsing, and the app's handler
    answers it as 413 JSON."""

    def __init__(self, max_bytes: int, seen: int) -> None:
        super().__init__(413, f"request body of more than {max_bytes} bytes (at least {seen} received); "
                              f"this service accepts at most {max_bytes}", headers={"Connection": "close"})
        self.max_bytes, self.seen = max_bytes, seen


class BodyLimitMiddleware:
    """413 for a body over ``max_bytes``: at once when its ``Content-Length``
    says so, else as soon as the chunks received pass it (the rest is never
    read; the answer closes the connection). Each refusal is logged with
    the bytes received (``refused a request body ...``), and passed to
    ``on_refused(bytes_received)`` when given."""

    def __init__(self, app: Any, max_bytes: int, on_refused: Optional[Callable[[int], None]] = None) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.app, self.max_bytes, self.on_refused = app, int(max_bytes), on_refused

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
            self._refused(0)
            response = error_response(413, "too_large", f"request body of {int(length)} bytes; this service "
                                                        f"accepts at most {self.max_bytes}",
                                      headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    self._refused(seen)
                    raise BodyTooLarge(self.max_bytes, seen)
            return message

        await self.app(scope, limited_receive, send)

    def _refused(self, seen: int) -> None:
        logger.warning("refused a request body after %d bytes received (limit %d)", seen, self.max_bytes)
        if self.on_refused:
            self.on_refused(seen)


# --- who may ask -------------------------------------------------------------------------


class TokenAuthMiddleware:
    """The API needs ``Authorization: Bearer <token>``; the page, its
    static files, ``/health`` and the API description stay open
    (:data:`OPEN_PATHS`). The token is compared with
    ``hmac.compare_digest`` and never logged or echoed."""

    def __init__(self, app: Any, token: str) -> None:
        if not token:
            raise ValueError("the auth token is empty")
        self.app, self._token = app, token.encode("utf8")

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                # compare_digest on bytes of any length: no early exit on the first difference
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not is_open_path(scope.get("path", "")) and scope.get("method") != "OPTIONS" \
                and not self._authorized(scope):
            response = error_response(401, "unauthorized", "this service needs its access token: send the header "
                                                           "'Authorization: Bearer <token>' (the page asks for it)",
                                      headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class TokenBuckets:
    """One token bucket per key: ``burst`` tokens, refilled at ``rate``
    per second; a request takes one. Thread-safe; buckets full again are
    forgotten, so memory grows with the clients seen within
    ``burst / rate`` seconds, not with all clients ever."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate} and {burst}")
        self.rate, self.burst, self.clock = float(rate), int(burst), clock
        self._buckets: Dict[str, Tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()
        self._last_sweep = clock()

    def take(self, key: str) -> float:
        """0 when ``key`` may go ahead (a token is taken), else the seconds
        until it may."""
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                wait = 0.0
            else:
                self._buckets[key] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
            if now - self._last_sweep > self.burst / self.rate:
                full = [k for k, (t, a) in self._buckets.items() if t + (now - a) * self.rate >= self.burst]
                for k in full:
                    del self._buckets[k]
                self._last_sweep = now
            return wait


class RateLimitMiddleware:
    """429 with ``Retry-After`` (whole seconds) when a client address has
    used its bucket (:class:`TokenBuckets`). Static files do not count.
    Behind a proxy every client has the proxy's address: limit there."""

    def __init__(self, app: Any, rate: float, burst: int) -> None:
        self.app, self.buckets = app, TokenBuckets(rate, burst)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope.get("path", "").startswith(OPEN_PREFIXES):
            client = scope.get("client")
            wait = self.buckets.take(client[0] if client else "")
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                response = error_response(429, "rate_limited", f"too many requests from this address; "
                                                               f"try again in {seconds} s",
                                          headers={"Retry-After": str(seconds)})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# --- what every answer says about itself ------------------------------------------------

#: The page's policy: its own scripts, styles and requests only; no inline
#: script; inline ``style`` attributes allowed (the rendered essay colours
#: sentences, branches and components with them; styles cannot run code).
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


class SecurityHeadersMiddleware:
    """Adds Content-Security-Policy (``csp_for(path)``, default
    :data:`PAGE_CSP`), ``X-Content-Type-Options: nosniff``,
    ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer`` to every
    answer that does not set them itself."""

    def __init__(self, app: Any, csp_for: Callable[[str], str] = lambda path: PAGE_CSP) -> None:
        self.app, self.csp_for = app, csp_for

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [(b"content-security-policy", self.csp_for(scope.get("path", "")).encode("latin-1")),
                 (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                 (b"referrer-policy", b"no-referrer")]

        async def send_with_headers(message: Dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {name.lower() for name, _ in headers}
                headers.extend((name, value) for name, value in extra if name not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# --- slow clients ------------------------------------------------------------------------


class HeaderTimeoutH11Protocol(H11Protocol):
    """uvicorn's h11 protocol that closes a connection whose request line
    and headers have not all arrived ``header_timeout`` seconds after it
    started waiting for them (the connection's start, or the end of the
    previous answer). Use :func:`header_timeout_protocol` to set it."""

    header_timeout: float = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_timer: Optional[asyncio.TimerHandle] = None
        super().connection_made(transport)
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request's headers are in
            self._disarm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:  # waiting for the next request's headers
            self._arm_header_timer()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None and not self.transport.is_closing():
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request headers did not arrive within %.1f s",
                              self.header_timeout)
            self.transport.close()


def header_timeout_protocol(seconds: float) -> type:
    """A :class:`HeaderTimeoutH11Protocol` class with ``header_timeout =
    seconds``, for ``uvicorn.Config(http=...)``."""
    if not seconds > 0:
        raise ValueError(f"the header timeout must be > 0 seconds, got {seconds}")
    return type("HeaderTimeoutH11Protocol", (HeaderTimeoutH11Protocol,), {"header_timeout": float(seconds)})


__all__ = ["BodyLimitMiddleware", "BodyTooLarge", "TokenAuthMiddleware", "TokenBuckets", "RateLimitMiddleware",
           "SecurityHeadersMiddleware", "HeaderTimeoutH11Protocol", "header_timeout_protocol", "PAGE_CSP",
           "OPEN_PATHS", "error_response", "is_open_path"]
