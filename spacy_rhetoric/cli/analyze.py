"""Users' commands: ``analyze`` a folder of essays, ``serve`` the page and REST API."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import app


@app.command("analyze")
def analyze_cmd(
    paths: List[str] = typer.Argument(..., help="Files (.txt, PSE-I .xml), folders, or - for stdin"),
    fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl (schema spacy-rhetoric/analysis/v1) or html"),
    output: str = typer.Option("-", "--output", "-o", help="Output file (- = stdout)"),
    model: str = typer.Option("zh_rhetoric", "--model", "-m", help="Installed pipeline name or pipeline folder"),
    n_process: int = typer.Option(1, "--n-process", min=1, help="Worker processes for nlp.pipe (local engine)"),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Documents per batch"),
    split: Optional[str] = typer.Option(None, "--split", help="For a PSE-I folder with splits.json: only this split (train, dev, optimization, test)"),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Raise the pipeline's max_length (characters per document)"),
    encoding: str = typer.Option("auto", "--encoding", help="auto (BOM, UTF-8, else charset-normalizer; GB18030 preferred) or a codec name to force (.txt and stdin)"),
    resume: bool = typer.Option(False, "--resume", help="Append to an existing JSONL --output, skipping the ids it already holds"),
    engine: str = typer.Option("local", "--engine", help="local (nlp.pipe) or ray (Ray Data actor pool; pip install 'spacy-rhetoric[ray]')"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster (auto, ray://HOST:10001); default: start Ray on this machine"),
    num_actors: int = typer.Option(1, "--num-actors", min=1, help="Ray actors, each holding one pipeline (--engine ray)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on stderr"),
    piece_chars: Optional[int] = typer.Option(None, "--piece-chars", min=1, help="Analyse each document in pieces of at most this many characters (whole paragraphs, else sentences); memory grows with --batch-size times this (default 2000)"),
    threads: Optional[str] = typer.Option(None, "--threads", help="torch and BLAS threads: a number, or auto (default, or RHETORIC_THREADS): a transformer encoder gets the physical cores other processes leave free, the rest one thread; --n-process workers always run one"),
) -> None:
    """Find rhetorical devices in documents; writes one JSONL record per document or an HTML report.

    A document that cannot be read or analysed gets an error record; the
    others are analysed, and the command exits 1 if any failed. Messages
    go to stderr, one line each, never wrapped, with control characters
    (of file names, say) escaped.
    """
    from ..analysis.io import printable
    from ..analysis.driver import analyze

    def say(message: str) -> None:
        typer.echo(printable(message), err=True)

    try:
        totals = analyze(paths, output, model=model, fmt=fmt.lower(), n_process=n_process, batch_size=batch_size,
                         split=split, max_length=max_length, progress=progress, encoding=encoding, resume=resume,
                         engine=engine.lower(), ray_address=ray_address, num_actors=num_actors, on_message=say,
                         piece_chars=piece_chars, threads=threads)
    except (ValueError, OSError, RuntimeError) as err:
        say(f"error: {err}")
        raise typer.Exit(1)
    failed = totals["failed"] + totals["skipped_failed"]
    line = f"documents: {totals['ok']} ok, {totals['failed']} failed"
    if resume:
        line += (f", {totals['skipped']} skipped (already in the output: {totals['skipped'] - totals['skipped_failed']} ok, "
                 f"{totals['skipped_failed']} failed)")
    line += f" -> {'stdout' if output == '-' else output}; " + ", ".join(
        f"{k} {totals[k]}" for k in ("sentences", "device_sentences", "components", "parallelisms"))
    say(line)
    if failed:
        raise typer.Exit(1)


@app.command("serve")
def serve_cmd(
    model: str = typer.Option(..., "--model", "-m", help="Installed pipeline name or pipeline folder (loaded once)"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)"),
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port (0: any free port, printed at start)"),
    generator_config: Optional[Path] = typer.Option(None, "--generator-config", exists=True, dir_okay=False, help="Config with [components.rhetoric_generator] naming an LLM backend; enables POST /suggest"),
    max_chars: int = typer.Option(100_000, "--max-chars", min=1, help="Most characters one request may carry (413 above)"),
    max_texts: int = typer.Option(100, "--max-texts", min=1, help="Most texts one /analyze request may carry (413 above)"),
    max_spans: int = typer.Option(20_000, "--max-spans", min=1, help="Most sentences + branches + components of a record /render draws (413 above)"),
    auth_token_env: Optional[str] = typer.Option(None, "--auth-token-env", help="Name of the environment variable holding the access token; the API then needs 'Authorization: Bearer <token>'"),
    rate_limit: float = typer.Option(10.0, "--rate-limit", min=0, help="Requests per second per client address (0: no limit; 429 above)"),
    rate_burst: int = typer.Option(60, "--rate-burst", min=1, help="Requests a client address may make at once before --rate-limit applies"),
    timeout_keep_alive: int = typer.Option(5, "--timeout-keep-alive", min=1, help="Seconds an idle kept-alive connection stays open (uvicorn)"),
    header_timeout: float = typer.Option(10.0, "--header-timeout", min=0.1, help="Seconds a connection may take to send a request's headers before it is closed"),
    limit_concurrency: int = typer.Option(200, "--limit-concurrency", min=1, help="Most connections and requests at once; 503 above (uvicorn)"),
    max_header_bytes: int = typer.Option(16_384, "--max-header-bytes", min=1024, help="Most bytes of a request's line and headers; 431 above (h11)"),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (debug, info, warning, error)"),
) -> None:
    """Serve the page for teachers (GET /) and the REST API (GET /health, POST /analyze, /render, /suggest).

    Needs FastAPI and uvicorn (the serve extra of spacy-rhetoric). See
    spacy_rhetoric/serve/app.py for the endpoints and the worker model.
    """
    try:
        from ..serve.app import run
    except ImportError as err:
        typer.echo(f"error: {err}; install the serve extra: pip install 'spacy-rhetoric[serve]'", err=True)
        raise typer.Exit(1)
    try:
        run(model, host=host, port=port, generator_config=generator_config, max_chars=max_chars, max_texts=max_texts,
            max_spans=max_spans, auth_token_env=auth_token_env, rate_limit=rate_limit, rate_burst=rate_burst,
            timeout_keep_alive=timeout_keep_alive, header_timeout=header_timeout, limit_concurrency=limit_concurrency,
            max_header_bytes=max_header_bytes, log_level=log_level.lower(), echo=lambda line: typer.echo(line, err=True))
    except (ValueError, OSError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)
