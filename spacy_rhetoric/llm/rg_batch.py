"""Generate for many RG records: the input of ``rhetoric research evaluate-generation``.

``rhetoric research generate-records`` draws a fixed random sample of held-out RG
records (``sample_records``: the same seed and size give the same records,
whatever the system) and writes one line per record in the format
:func:`spacy_rhetoric.research.generation.read_generation_jsonl` reads::

    {"id": 17, "system": "gemma-270m-lora", "context": [...],
     "condition": {"rhetoric": "metaphor", "object": "月亮"},
     "reference": "...", "candidates": ["..."], "prompt": "...",
     "failures": [{"raw": "...", "error": "..."}], "source": {...}}

The ``human`` system writes each record's reference as its only candidate
(the ceiling of the classifier-based metrics). Lines are appended and
flushed per batch, and ``resume`` skips ids already written, so an
interrupted run loses at most one batch.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Set, Union

from ..errors import Errors
from .records import RGRecord

HUMAN = "human"


def sample_records(records: Sequence[RGRecord], n: int, seed: int = 0) -> List[tuple]:
    """``(index, record)`` pairs of a seeded sample of ``n`` records (all
    when fewer), in file order."""
    if n <= 0 or n >= len(records):
        return list(enumerate(records))
    picked = sorted(random.Random(seed).sample(range(len(records)), n))
    return [(i, records[i]) for i in picked]


def written_ids(path: Union[str, Path]) -> Set[int]:
    """Ids of the complete lines already in ``path`` (a line cut off by an
    interruption is ignored and rewritten)."""
    done: Set[int] = set()
    path = Path(path)
    if not path.exists():
        return done
    with path.open(encoding="utf8") as fh:
        for line in fh:
            try:
                done.add(int(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                continue
    return done


def _drop_partial_line(path: Path) -> None:
    """Cut a line left unfinished by an interruption, so appended lines
    start on a line of their own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _line(i: int, rec: RGRecord, system: str, candidates: List[str], prompt: Optional[str], failures: List[dict]) -> str:
    row = {
        "id": i,
        "system": system,
        "context": list(rec.previous_sentences),
        "condition": {"rhetoric": rec.rhetoric, "object": rec.object},
        "reference": rec.target,
        "candidates": candidates,
        "prompt": prompt,
        "failures": failures,
        "source": {"source": rec.source, **rec.meta},
    }
    return json.dumps(row, ensure_ascii=False) + "\n"


def rg_request(generator: Any, rec: RGRecord) -> Any:
    """The generator's request for a record: its context clipped as the
    generator clips it (``n_context`` sentences, ``max_sentence_chars``)."""
    from .tasks import RGRequest

    return RGRequest(generator._clip_context(rec.previous_sentences), rec.rhetoric, rec.object)


def _prompt_text(generator: Any, rec: RGRecord) -> str:
    return generator.task.prompt_text(rg_request(generator, rec))


def generate_records(
    pairs: Iterable[tuple],
    output: Union[str, Path],
    *,
    system: str,
    generator: Any = None,
    batch_size: int = 8,
    resume: bool = False,
    progress: bool = True,
) -> int:
    """Write one line per ``(index, record)`` pair to ``output`` (see the
    module docstring) and return the number of lines written now.
    generator: a :class:`RhetoricGenerator` (None for the ``human`` system).
    Raises ``ValueError`` for a model system without a generator.
    """
    from spacy.util import minibatch
    from tqdm import tqdm

    if generator is None and system != HUMAN:
        raise ValueError(Errors.R012.format(system=system, human=HUMAN))
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if resume:
        _drop_partial_line(output)
    done = written_ids(output) if resume else set()
    todo = [(i, r) for i, r in pairs if i not in done]
    mode = "a" if resume else "w"
    written = 0
    with output.open(mode, encoding="utf8") as fh, tqdm(total=len(todo), disable=not progress, desc=system) as bar:
        for batch in minibatch(todo, size=batch_size):
            lines = [_batch_line(generator, system, i, rec, cands) for (i, rec), cands in zip(batch, _generate(generator, batch))]
            fh.write("".join(lines))
            fh.flush()
            os.fsync(fh.fileno())
            written += len(lines)
            bar.update(len(lines))
    return written


def _generate(generator: Any, batch: List[tuple]) -> List[Optional[list]]:
    if generator is None:
        return [None] * len(batch)
    jobs = [(generator._clip_context(rec.previous_sentences), rec.rhetoric, rec.object, None) for _, rec in batch]
    return [result.candidates for result in generator._run(jobs, generator.cfg["n_candidates"])]


def _batch_line(generator: Any, system: str, i: int, rec: RGRecord, cands: Optional[list]) -> str:
    if cands is None:
        return _line(i, rec, system, [rec.target], None, [])
    good = [c.text for c in cands if c.ok]
    failures = [{"raw": c.raw, "error": c.error} for c in cands if not c.ok]
    return _line(i, rec, system, good, _prompt_text(generator, rec), failures)


def read_generation_lines(path: Union[str, Path]) -> dict:
    """``{id: row}`` of a ``generate-records`` file (complete lines only)."""
    rows = {}
    with Path(path).open(encoding="utf8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
                rows[int(row["id"])] = row
            except (ValueError, KeyError, TypeError):
                continue
    return rows


def samples_markdown(paths: Sequence[Union[str, Path]], n: int = 10, seed: int = 0) -> str:
    """A Markdown page of ``n`` records drawn with ``seed`` from the ids that
    every file holds (never chosen by hand): per record the request, and
    per system its prompt and its generation (or why it failed)."""
    files = [read_generation_lines(p) for p in paths]
    common = sorted(set.intersection(*(set(f) for f in files))) if files else []
    picked = sorted(random.Random(seed).sample(common, min(n, len(common))))
    out = [f"# {len(picked)} generations per system (records drawn with seed {seed} from {len(common)} shared ids)\n"]
    for i in picked:
        first = files[0][i]
        cond = first["condition"]
        out.append(f"## record {i}: {cond['rhetoric']}, object 「{cond['object']}」\n")
        out.append(f"- context: {' '.join(first['context']) or '(none)'}")
        out.append(f"- reference: {first['reference']}\n")
        for rows in files:
            row = rows[i]
            text = row["candidates"][0] if row["candidates"] else f"(failed: {row['failures'][0]['error'] if row['failures'] else 'no answer'})"
            out.append(f"**{row['system']}**: {text}\n")
            if row.get("prompt"):
                out.append("<details><summary>prompt</summary>\n\n```\n" + row["prompt"] + "\n```\n</details>\n")
    return "\n".join(out) + "\n"
