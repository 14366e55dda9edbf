"""A blind read of returned suggestions by a team annotator.

:func:`make_sheet` draws, per device and with a seed, ``per_device``
requests of an ``evaluate-suggestions`` results file and takes the
suggestion the system returned first for each (what a teacher sees first),
adds ``human_per_device`` human sentences of other requests as a control,
and shuffles them. The sheet shows only what a reader needs: the context,
the requested device and object, and the sentence. Which system wrote it and
whether the analyser verified it are in a separate key, which the annotator
does not open.

The annotator answers, for each item, three yes/no questions (written
guidelines in ``annotations/suggestions/README.md``): ``device`` (the
sentence uses the requested device on the requested object, by
``annotations/GUIDELINES.md``), ``fluent`` (grammatical, natural Chinese),
``fits`` (it can follow the context). :func:`score` joins answers and key
and reports the share of "yes" per device and per group (returned and
verified, returned and unverified, human). :func:`agreement` compares two
readers' independent answers to the same sheet (Cohen's κ per question).
"""
from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from ..corpora.jsonio import iter_jsonl_objects
from ..errors import CorpusFormatError

QUESTIONS = ("device", "fluent", "fits")


def make_sheet(rows: Sequence[Dict[str, Any]], per_device: int, human_per_device: int, seed: int = 0
               ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(sheet, key)``, aligned by ``item``: ``per_device`` returned
    suggestions and ``human_per_device`` human sentences per device, in a
    seeded shuffled order."""
    rng = random.Random(seed)
    items: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
    for device in sorted({r["rhetoric"] for r in rows}):
        pool = [r for r in rows if r["rhetoric"] == device]
        returned = rng.sample([r for r in pool if r["returned"]], min(per_device, sum(1 for r in pool if r["returned"])))
        others = [r for r in pool if r not in returned]
        human = rng.sample(others, min(human_per_device, len(others)))
        for r in returned:
            items.append((_shown(r, r["returned"]), {"request": r["id"], "group": "verified" if r["returned_verified"]
                                                     else "unverified", "rhetoric": device}))
        for r in human:
            items.append((_shown(r, r["human"]), {"request": r["id"], "group": "human", "rhetoric": device}))
    rng.shuffle(items)
    sheet, key = [], []
    for i, (shown, secret) in enumerate(items, start=1):
        sheet.append({"item": i, **shown, **{q: None for q in QUESTIONS}, "note": ""})
        key.append({"item": i, **secret})
    return sheet, key


def _shown(row: Dict[str, Any], sentence: str) -> Dict[str, Any]:
    return {"context": row["context"], "rhetoric": row["rhetoric"], "object": row["object"], "sentence": sentence}


def read_answers(path: Path) -> Dict[int, Dict[str, Any]]:
    """The annotated sheet: item -> answers. Raises CorpusFormatError naming
    the file and line for an answer that is not true/false."""
    out = {}
    for line, obj in iter_jsonl_objects(path):
        bad = [q for q in QUESTIONS if not isinstance(obj.get(q), bool)]
        if bad or not isinstance(obj.get("item"), int):
            raise CorpusFormatError(path, f"item needs an integer 'item' and true/false {list(QUESTIONS)}; "
                                          f"not answered: {bad}", line=line)
        out[obj["item"]] = obj
    return out


def score(answers: Dict[int, Dict[str, Any]], key: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Share of "yes" per question for each device x group (and each
    device's returned suggestions together), with counts. Raises ValueError
    when an item of the key is unanswered."""
    missing = [k["item"] for k in key if k["item"] not in answers]
    if missing:
        raise ValueError(f"{len(missing)} items not answered, e.g. {missing[:5]}")
    groups: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for k in key:
        a = answers[k["item"]]
        groups[f"{k['rhetoric']}/{k['group']}"].append(a)
        if k["group"] != "human":
            groups[f"{k['rhetoric']}/returned"].append(a)
    return {name: {"items": len(group), **{q: round(sum(a[q] for a in group) / len(group), 4) for q in QUESTIONS}}
            for name, group in sorted(groups.items())}


def agreement(first: Dict[int, Dict[str, Any]], second: Dict[int, Dict[str, Any]]) -> Dict[str, Any]:
    """Two readers of one sheet, per question: the items both answered,
    the share they agree on, and Cohen's κ (Cohen 1960;
    :func:`spacy_rhetoric.research.agreement.cohen_kappa`; nan when both
    answer one value throughout). Raises ValueError when they share no item."""
    from .agreement import cohen_kappa

    items = sorted(set(first) & set(second))
    if not items:
        raise ValueError("the two sheets have no answered item in common")
    out: Dict[str, Any] = {"items": len(items)}
    for q in QUESTIONS:
        a, b = [first[i][q] for i in items], [second[i][q] for i in items]
        out[q] = {"agreement": round(sum(x == y for x, y in zip(a, b)) / len(items), 4),
                  "kappa": round(cohen_kappa(a, b, labels=[False, True]), 4)}
    return out


def write_jsonl(items: Sequence[Dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf8")
