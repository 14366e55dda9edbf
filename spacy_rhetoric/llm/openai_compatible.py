"""Backend for any OpenAI-compatible chat-completions server.

Works with vLLM, Ollama, LM Studio, llama.cpp's server and hosted APIs that
implement ``POST {base_url}/chat/completions``. Registered as
``spacy_rhetoric.OpenAICompatible.v1`` in ``registry.llm_backends``::

    [components.rhetoric_generator.backend]
    @llm_backends = "spacy_rhetoric.OpenAICompatible.v1"
    base_url = "http://127.0.0.1:8000/v1"
    model = "Qwen1.5-7B-Chat"
    api_key_env = "OPENAI_API_KEY"
    timeout = 60.0
    max_retries = 3
    concurrency = 4

Secrets: only the *name* of the environment variable is part of the config.
The key is read from the environment for each request, stripped of the
whitespace around it, never stored on the backend object, and removed in
every form (:mod:`spacy_rhetoric.llm.redaction`) from every error message and
log line, before the message is cut to length (a server may echo request
headers in an error body).
"""
from __future__ import annotations

import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Sequence, Tuple

import httpx

from ..errors import RequestFailed
from .base import Completion, Message, registry
from .redaction import clean_secret
from .redaction import redact as _redact_all

logger = logging.getLogger(__name__)

#: HTTP statuses that are worth retrying: rate limits and server-side faults.
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Longest wait honoured from a ``Retry-After`` header, in seconds.
MAX_RETRY_AFTER_S = 60.0
#: How much of an error body is quoted in an error message (characters).
ERROR_BODY_CHARS = 300


def redact(text: str, secret: Optional[str]) -> str:
    """Return ``text`` with every form of ``secret`` (raw, stripped, escaped;
    :func:`spacy_rhetoric.llm.redaction.secret_forms`) replaced by ``***``."""
    return _redact_all(text, [secret])


class OpenAICompatibleBackend:
    """Chat completions over HTTP with retries and bounded concurrency.

    base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (the path
        ``/chat/completions`` is appended).
    model: the model name the server expects.
    api_key_env: name of the environment variable holding the API key, or
        None/"" for servers without authentication. If the variable is unset
        the request is sent without ``Authorization`` (fine for local
        servers; hosted APIs then answer 401, reported as a failure).
    timeout: seconds allowed for one HTTP request (connect + read).
    max_retries: extra attempts after a retryable failure (429, 5xx,
        timeouts, connection errors); total attempts = max_retries + 1.
    concurrency: at most this many requests in flight at once.
    backoff: base wait in seconds; attempt ``a`` waits ``backoff * 2**a``
        (plus up to 25 % jitter, capped at ``max_backoff``) unless the server
        sends ``Retry-After``.
    logprobs: ask for token log-probabilities (OpenAI ``logprobs: true``);
        ``Completion.logprob`` is then the sum over the answer tokens.
        Servers that do not support it simply return none.
    extra_body: additional JSON fields sent with every request (e.g.
        ``{"top_p": 0.9}``); must not contain secrets, since it is config.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: Optional[str] = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 3,
        concurrency: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        logprobs: bool = False,
        extra_body: Optional[Dict[str, Any]] = None,
    ) -> None:
        if not base_url:
            raise ValueError("OpenAICompatible backend: base_url is empty.")
        if timeout <= 0:
            raise ValueError(f"OpenAICompatible backend: timeout must be > 0, got {timeout}.")
        if max_retries < 0 or concurrency < 1:
            raise ValueError("OpenAICompatible backend: max_retries must be >= 0 and concurrency >= 1.")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env or None
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.concurrency = int(concurrency)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.logprobs = bool(logprobs)
        self.extra_body = dict(extra_body or {})
        self._warned_no_key = False

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(url={self.url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    # -- public API -------------------------------------------------------
    def chat(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 128,
    ) -> List[List[Completion]]:
        """Answer each conversation ``n`` times (see ``LLMBackend.chat``).

        Returns ``len(conversations)`` lists of ``n`` completions. A request
        that still fails after the retries yields completions with ``error``
        set (HTTP status or ``timeout``), never an exception; ``n`` choices
        are asked for in one request and any missing ones are requested
        again singly (some servers ignore ``n``). Raises ``ValueError`` for
        ``n < 1``.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not conversations:
            return []
        key = self._api_key()
        with httpx.Client(timeout=self.timeout) as client:
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                futures = [
                    pool.submit(self._answer, client, key, list(conv), n, temperature, max_new_tokens)
                    for conv in conversations
                ]
                return [f.result() for f in futures]

    # -- internals --------------------------------------------------------
    def _api_key(self) -> Optional[str]:
        if not self.api_key_env:
            return None
        raw = os.environ.get(self.api_key_env)
        try:
            key = clean_secret(raw)
        except ValueError as err:
            raise ValueError(f"environment variable {self.api_key_env}: {err}") from None
        if not key and not self._warned_no_key:
            logger.warning(
                "Environment variable %s is not set; sending requests without an API key.",
                self.api_key_env,
            )
            self._warned_no_key = True
        return key

    def _answer(
        self,
        client: httpx.Client,
        key: Optional[str],
        messages: List[Message],
        n: int,
        temperature: float,
        max_new_tokens: int,
    ) -> List[Completion]:
        out: List[Completion] = []
        # Ask for all n at once; servers that ignore ``n`` get asked again.
        while len(out) < n:
            want = n - len(out)
            got = self._request_with_retries(client, key, messages, want, temperature, max_new_tokens)
            out.extend(got[:want])
            if got and got[0].error is not None:
                out.extend(got[0] for _ in range(n - len(out)))
        return out

    def _request_with_retries(
        self,
        client: httpx.Client,
        key: Optional[str],
        messages: List[Message],
        n: int,
        temperature: float,
        max_new_tokens: int,
    ) -> List[Completion]:
        body: Dict[str, Any] = {
            **self.extra_body,
            "model": self.model,
            "messages": messages,
            "temperature": float(temperature),
            "max_tokens": int(max_new_tokens),
        }
        if n > 1:
            body["n"] = n
        if self.logprobs:
            body["logprobs"] = True
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            try:
                return self._request_once(client, headers, body, attempt + 1, key)
            except RequestFailed as err:
                last_error = redact(str(err), key)
                if not err.retry or attempt == self.max_retries:
                    break
                wait = err.wait if err.wait is not None else self._backoff(attempt)
                logger.info(
                    "%s: attempt %d/%d failed (%s); retrying in %.2f s",
                    self.url, attempt + 1, self.max_retries + 1, last_error, wait,
                )
                time.sleep(wait)
        logger.warning("%s: request failed: %s", self.url, last_error)
        return [Completion(text="", error=last_error, meta={"attempts": attempt + 1})]

    def _backoff(self, attempt: int) -> float:
        wait = self.backoff * (2 ** attempt)
        return min(self.max_backoff, wait * (1.0 + 0.25 * random.random()))

    def _request_once(
        self, client: httpx.Client, headers: Dict[str, str], body: Dict[str, Any], attempt: int,
        key: Optional[str] = None,
    ) -> List[Completion]:
        try:
            resp = client.post(self.url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise RequestFailed(f"timeout after {self.timeout:g} s", retry=True)
        except httpx.TransportError as err:
            raise RequestFailed(redact(f"connection error: {type(err).__name__}: {err}", key), retry=True)
        if resp.status_code != 200:
            raise self._http_error(resp, key)
        try:
            data = resp.json()
            choices = data["choices"]
            if not isinstance(choices, list) or not choices:
                raise ValueError("no choices")
        except (ValueError, KeyError, TypeError) as err:
            raise RequestFailed(
                f"malformed response from server ({type(err).__name__}: {err}): "
                f"{redact(resp.text, key)[:ERROR_BODY_CHARS]!r}",
                retry=False,
            )
        return [self._completion(choice, data, attempt) for choice in choices]

    def _http_error(self, resp: httpx.Response, key: Optional[str] = None) -> RequestFailed:
        status = resp.status_code
        # redacted whole, then cut: a key across the cut must not leave its prefix
        message = f"HTTP {status}: {redact(resp.text, key)[:ERROR_BODY_CHARS]}"
        if status in (401, 403) and self.api_key_env:
            message += f" (is the environment variable {self.api_key_env} set to a valid key?)"
        wait = None
        retry_after = resp.headers.get("retry-after")
        if retry_after:
            try:
                wait = min(MAX_RETRY_AFTER_S, max(0.0, float(retry_after)))
            except ValueError:
                wait = None
        return RequestFailed(message, retry=status in RETRY_STATUSES, wait=wait)

    @staticmethod
    def _completion(choice: Dict[str, Any], data: Dict[str, Any], attempt: int) -> Completion:
        message = choice.get("message") or {}
        text = message.get("content")
        meta = {
            "finish_reason": choice.get("finish_reason"),
            "model": data.get("model"),
            "attempts": attempt,
        }
        if not isinstance(text, str):
            return Completion(text="", error="server returned no message content", meta=meta)
        logprob, n_tokens = _sum_logprobs(choice.get("logprobs"))
        if n_tokens is None:
            usage = data.get("usage") or {}
            # Token usage covers all n choices together; only exact for n=1.
            if len(data.get("choices") or []) == 1:
                n_tokens = usage.get("completion_tokens")
        return Completion(text=text, logprob=logprob, n_tokens=n_tokens, meta=meta)


def _sum_logprobs(logprobs: Any) -> Tuple[Optional[float], Optional[int]]:
    """Sum of token log-probabilities in an OpenAI ``choice.logprobs`` block
    (``{"content": [{"token", "logprob"}, ...]}``); (None, None) if absent."""
    if not isinstance(logprobs, dict):
        return None, None
    content = logprobs.get("content")
    if not isinstance(content, list) or not content:
        return None, None
    try:
        values = [float(item["logprob"]) for item in content]
    except (KeyError, TypeError, ValueError):
        return None, None
    return sum(values), len(values)


@registry.llm_backends("spacy_rhetoric.OpenAICompatible.v1")
def make_openai_compatible(
    base_url: str,
    model: str,
    api_key_env: Optional[str] = "OPENAI_API_KEY",
    timeout: float = 60.0,
    max_retries: int = 3,
    concurrency: int = 4,
    backoff: float = 0.5,
    max_backoff: float = 8.0,
    logprobs: bool = False,
    extra_body: Optional[Dict[str, Any]] = None,
) -> OpenAICompatibleBackend:
    """Registered factory of :class:`OpenAICompatibleBackend` (see there)."""
    return OpenAICompatibleBackend(
        base_url,
        model,
        api_key_env=api_key_env,
        timeout=timeout,
        max_retries=max_retries,
        concurrency=concurrency,
        backoff=backoff,
        max_backoff=max_backoff,
        logprobs=logprobs,
        extra_body=extra_body,
    )
