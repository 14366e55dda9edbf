"""A bounded soak of ``rhetoric serve`` on loopback: the real command in a
child process, then three phases, each bounded in count and time.

1. **Load**: ``requests`` POST ``/analyze`` from ``clients`` concurrent
   httpx clients (texts from ``--texts``, a folder of .txt / PSE-I .xml
   essays, else a built-in paragraph), each checked against the answer to
   the same text alone: latency p50/p95/max (ms), requests/s, errors
   (anything but 200 or a different record).
2. **Slow clients**: ``slow_clients`` connections that send part of a
   request's headers and then only one byte a second (and as many that send
   nothing), while a few ordinary requests go on: how many the server
   closed, the longest it took, and whether the ordinary requests were
   served.
3. **A large chunked body**: ``big_mib`` MiB sent chunked (no
   ``Content-Length``) to ``/analyze``: the status, the bytes the client got
   out before the refusal (socket buffers included), the bytes the server
   read (from its log line), and the server's peak RSS before and after.

Run: ``python -m spacy_rhetoric.serve.soak --model pipelines/zh_rhetoric
-o metrics/serve/soak.json`` (``spacy project run soak-serve research``). Not a
test: it prints what it measured and exits 1 only if the service failed
(an error in phase 1, a slow client still open, the body not refused).
"""
from __future__ import annotations

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import httpx
import typer

SAMPLE = ("春天来了，小草从地里探出头来，像一个个好奇的孩子。风轻轻地吹着，柳树摆动着长长的辫子。"
          "我们走在田野上，看见桃花笑红了脸，听见小鸟在枝头唱歌。\n"
          "春天是一幅画，春天是一首诗，春天是一支歌。")


def peak_rss_mib(pid: int) -> Optional[float]:
    """Peak resident memory of process ``pid`` (``VmHWM``, Linux), MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def load_texts(folder: Optional[Path], limit: int) -> List[str]:
    if folder is None:
        return [SAMPLE]
    from ..analysis.io import iter_inputs

    paths = sorted(p for p in folder.iterdir() if p.suffix in (".txt", ".xml"))[:limit]
    return [doc.text for doc in iter_inputs(paths) if doc.text]


def start_server(model: str, log: Path, args: List[str], timeout: float = 300.0) -> tuple:
    """``rhetoric serve`` on a free loopback port; ``(process, base_url)``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spacy_rhetoric", "serve", "--model", model, "--port", "0", *args],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        found = re.search(r"at (http://127\.0\.0\.1:\d+)/", log.read_text(errors="replace"))
        if found:
            try:
                if httpx.get(found.group(1) + "/health", timeout=2).status_code == 200:
                    return proc, found.group(1)
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"serve did not answer within {timeout:.0f} s")


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def load_phase(base: str, texts: List[str], requests: int, clients: int) -> Dict[str, Any]:
    expected = {}
    with httpx.Client(timeout=300) as client:
        for text in texts:
            expected[text] = client.post(base + "/analyze", json={"text": text}).json()
    latencies: List[float] = []
    errors: List[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        text = texts[i % len(texts)]
        with httpx.Client(timeout=300) as client:
            started = time.perf_counter()
            try:
                resp = client.post(base + "/analyze", json={"text": text})
                ok = resp.status_code == 200 and resp.json() == expected[text]
                what = f"HTTP {resp.status_code}" if resp.status_code != 200 else "a different record"
            except httpx.HTTPError as err:
                ok, what = False, type(err).__name__
            elapsed = time.perf_counter() - started
        with lock:
            latencies.append(elapsed)
            if not ok:
                errors.append(what)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(requests)))
    wall = time.perf_counter() - started
    return {"requests": requests, "clients": clients, "texts": len(texts),
            "chars_per_request": round(statistics.mean(len(t) for t in texts)),
            "p50_ms": round(1000 * percentile(latencies, 0.5), 1), "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
            "max_ms": round(1000 * max(latencies), 1), "requests_per_s": round(requests / wall, 2),
            "errors": len(errors), "error_kinds": sorted(set(errors))}


def slow_phase(base: str, n: int, header_timeout: float, bound_s: float) -> Dict[str, Any]:
    host, port = base.rsplit("/", 1)[-1].split(":")
    opened = time.monotonic()
    conns = []
    for i in range(n):
        conn = socket.create_connection((host, int(port)), timeout=5)
        if i % 2 == 0:  # half start a request and trickle; half say nothing
            conn.sendall(b"POST /analyze HTTP/1.1\r\nHost: x\r\n")
        conn.setblocking(False)
        conns.append(conn)
    closed_after: List[Optional[float]] = [None] * n
    served, failed = 0, 0
    deadline = opened + bound_s
    next_byte = time.monotonic() + 1.0
    while time.monotonic() < deadline and any(c is None for c in closed_after):
        for i, conn in enumerate(conns):
            if closed_after[i] is not None:
                continue
            try:
                if conn.recv(4096) == b"":
                    closed_after[i] = time.monotonic() - opened
            except BlockingIOError:
                pass
            except OSError:
                closed_after[i] = time.monotonic() - opened
        if time.monotonic() >= next_byte:
            for i, conn in enumerate(conns):
                if i % 2 == 0 and closed_after[i] is None:
                    try:
                        conn.send(b"a")
                    except OSError:
                        pass
            next_byte += 1.0
        try:  # the others are still served meanwhile
            ok = httpx.get(base + "/health", timeout=10).status_code == 200
            served, failed = served + ok, failed + (not ok)
        except httpx.HTTPError:
            failed += 1
        time.sleep(0.05)
    for conn in conns:
        conn.close()
    done = [t for t in closed_after if t is not None]
    return {"connections": n, "header_timeout_s": header_timeout, "closed": len(done),
            "still_open_after_s": None if len(done) == n else round(bound_s, 1),
            "longest_to_close_s": round(max(done), 2) if done else None,
            "health_requests_meanwhile": served, "health_failures_meanwhile": failed}


def big_body_phase(base: str, mib: int, proc: subprocess.Popen, log: Path) -> Dict[str, Any]:
    sent = 0
    chunk = b"\xe6\x98\xa5" * 21845 + b"x"  # 64 KiB

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"text": "'
        for _ in range(mib * 16):
            sent += len(chunk)
            yield chunk
        yield b'"}'

    rss_before = peak_rss_mib(proc.pid)
    started = time.perf_counter()
    try:
        resp = httpx.post(base + "/analyze", content=body(), headers={"Content-Type": "application/json"}, timeout=120)
        status, answer = resp.status_code, (resp.json().get("error") or {}).get("type")
    except httpx.HTTPError as err:
        status, answer = None, type(err).__name__
    elapsed = time.perf_counter() - started
    time.sleep(0.5)  # the log line
    found = re.findall(r"refused a request body after (\d+) bytes received \(limit (\d+)\)", log.read_text(errors="replace"))
    server_read, limit = (int(found[-1][0]), int(found[-1][1])) if found else (None, None)
    return {"body_mib": mib, "status": status, "error_type": answer, "seconds": round(elapsed, 2),
            "client_sent_mib": round(sent / 2 ** 20, 2),
            "server_read_bytes": server_read, "limit_bytes": limit,
            "server_peak_rss_mib_before": rss_before, "server_peak_rss_mib_after": peak_rss_mib(proc.pid)}


def soak(model: str, *, texts: Optional[Path] = None, n_texts: int = 8, requests: int = 200, clients: int = 8,
         slow_clients: int = 100, header_timeout: float = 5.0, big_mib: int = 100, log: Optional[Path] = None,
         say: Any = print) -> Dict[str, Any]:
    """The three phases (module docstring) against ``rhetoric serve --model
    model``; returns their figures. The server runs with ``--rate-limit 0``
    (all clients are one address) and ``--header-timeout header_timeout``."""
    log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"soak-serve-{os.getpid()}.log"
    corpus = load_texts(texts, n_texts)
    proc, base = start_server(model, log, ["--rate-limit", "0", "--header-timeout", str(header_timeout),
                                           "--log-level", "warning"])
    try:
        served = httpx.get(base + "/health", timeout=10).json()["model"]
        say(f"serving {served['name']} {served['version']} at {base}; load: {requests} requests from {clients} clients")
        load = load_phase(base, corpus, requests, clients)
        say(json.dumps(load))
        say(f"slow clients: {slow_clients}")
        slow = slow_phase(base, slow_clients, header_timeout, bound_s=header_timeout * 4 + 10)
        say(json.dumps(slow))
        say(f"a {big_mib} MiB chunked body")
        big = big_body_phase(base, big_mib, proc, log)
        say(json.dumps(big))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    import platform

    return {"model": model, "served": served, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                        "platform": platform.platform(),
                                        "load_average_1min_at_end": round(os.getloadavg()[0], 2)},
            "load": load, "slow_clients": slow, "big_body": big}


def main(
    model: str = typer.Option(..., "--model", "-m", help="Pipeline name or folder to serve"),
    texts: Optional[Path] = typer.Option(None, "--texts", help="Folder of .txt / PSE-I .xml essays (default: one built-in paragraph)"),
    n_texts: int = typer.Option(8, "--n-texts", min=1, help="Essays taken from --texts"),
    requests: int = typer.Option(200, "--requests", min=1, max=10_000, help="Requests of the load phase"),
    clients: int = typer.Option(8, "--clients", min=1, max=64, help="Concurrent clients of the load phase"),
    slow_clients: int = typer.Option(100, "--slow-clients", min=1, max=1000, help="Connections that never finish their headers"),
    header_timeout: float = typer.Option(5.0, "--header-timeout", min=0.5, help="The server's --header-timeout"),
    big_mib: int = typer.Option(100, "--big-mib", min=1, max=1024, help="MiB of the chunked body"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures here (JSON)"),
) -> None:
    """A bounded soak of `rhetoric serve` on loopback (module docstring)."""
    result = soak(model, texts=texts, n_texts=n_texts, requests=requests, clients=clients, slow_clients=slow_clients,
                  header_timeout=header_timeout, big_mib=big_mib, say=lambda line: typer.echo(line, err=True))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf8")
    typer.echo(text)
    failed = (result["load"]["errors"] > 0 or result["slow_clients"]["closed"] < slow_clients
              or result["big_body"]["status"] != 413)
    raise typer.Exit(1 if failed else 0)


if __name__ == "__main__":
    typer.run(main)
