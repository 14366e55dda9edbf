"""Shared helpers: real RG records derived from the shared corpora and a tiny
random Qwen2 chat model whose vocabulary covers them."""
from __future__ import annotations

from pathlib import Path
from typing import List

from spacy_rhetoric.llm.prompts import format_answer, render_rg_prompt
from spacy_rhetoric.llm.records import RGRecord, cmdag_rg_records, simile_rg_records
from spacy_rhetoric.llm.tiny import build_tiny_chat_model


def real_records(simile_dir: Path, cmdag_dir: Path, n_simile: int = 6, n_cmdag: int = 2) -> List[RGRecord]:
    """The first simile-derived and CMDAG-derived RG records of the real data."""
    simile = simile_rg_records(next(simile_dir.glob("*-Dev.tsv")))[:n_simile]
    cmdag = [r for r in cmdag_rg_records(cmdag_dir / "val.json") if r.previous_sentences][:n_cmdag]
    return simile + cmdag


def tiny_model(path: Path, records: List[RGRecord]) -> Path:
    texts = [render_rg_prompt(r.rhetoric, r.object, r.previous_sentences) + format_answer(r.target) for r in records]
    texts += [render_rg_prompt(d, "月光", ["上文。"], language=lang) for d in ("metaphor", "personification", "hyperbole") for lang in ("zh", "en")]
    return build_tiny_chat_model(path, texts, max_chars=300, hidden_size=32, layers=2, heads=2)
