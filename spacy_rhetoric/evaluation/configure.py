"""ConFiguRe's three tasks on the raw path (Zhu et al. 2022, ``papers/001`` §4-§5).

Any ConFiguRe-format file (:func:`spacy_rhetoric.corpora.configure.read_configure`)
is read as text: each passage's ``fragment`` goes through ``nlp.pipe``
(tokenizer, clause segmenter, every component), and the pipeline's
``doc.spans["figurative_units"]`` is scored against the gold units by
character offsets (:mod:`spacy_rhetoric.scorers.figurative_units`):

- task 1, figure extraction: exact units, P/R/micro-F1;
- task 2, figure type classification given the gold units: each gold unit
  gets the type the ``figurative_units`` component scores highest over its
  clauses (:meth:`FigurativeUnits.classify_units`); micro-F1 (every gold unit
  gets one type, so micro P = R = F1 = accuracy) and macro-F1 over the types
  in gold or predictions;
- task 3, figure recognition: exact unit and type, P/R/micro-F1 and
  macro-F1; plus the overlap match.

``clause_aligned``: how many gold units begin and end on the pipeline's
clause boundaries (edge punctuation aside), the share an exact clause-level
tagger can reach at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..corpora.configure import FIGURATIVE_UNITS_KEY, Passage, read_configure, read_split, split_passages
from ..ml.figurative_tagger import CLAUSES_KEY, unit_clause_range
from ..scorers.figurative_units import classification_given_units, doc_units, gold_units, score_unit_sets, unit_key

#: The published baselines (Table 3), trained on the full training split
#: (6,254 units), RoBERTa-zh-Large; percentages.
PAPER = {
    "extraction_f": ("FECRF", 32.07),
    "classification_micro_f": ("FTCXT", 79.49),
    "classification_macro_f": ("FTCXT", 68.72),
    "recognition_f": ("E2ECRF", 30.99),
    "recognition_macro_f": ("E2ECRF", 21.27),
}


def load_passages(path: Union[str, Path], split: Optional[str] = None, split_path: Optional[Union[str, Path]] = None) -> List[Passage]:
    """The passages of ``path``; with ``split`` (``train`` or ``dev``) only
    those of that part of the split file ``split_path``."""
    passages = read_configure(path)
    if split is None:
        return passages
    parts = split_passages(passages, read_split(split_path))
    if split not in parts:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(parts)}")
    return parts[split]


def clause_alignment(docs: Sequence[Doc], passages: Sequence[Passage], clauses_key: str = CLAUSES_KEY) -> Dict[str, int]:
    """``{"units", "aligned", "no_clause"}``: gold units whose edge-trimmed
    offsets equal those of the clause run they touch, and units touching no
    clause."""
    aligned = none = total = 0
    for doc, passage in zip(docs, passages):
        clauses = sorted(doc.spans.get(clauses_key, []), key=lambda s: s.start)
        bounds = [(c.start_char, c.end_char) for c in clauses]
        for begin, end, _ in gold_units(passage):
            total += 1
            found = unit_clause_range(bounds, begin, end)
            if found is None:
                none += 1
                continue
            first, last = found
            run = unit_key(doc.text, bounds[first][0], bounds[last][1])
            aligned += run == (begin, end)
    return {"units": total, "aligned": aligned, "no_clause": none}


def evaluate_configure(
    nlp: Language, passages: Sequence[Passage], component: str = "figurative_units", batch_size: int = 8,
) -> Dict[str, Any]:
    """All figures of the module docstring for ``passages`` on ``nlp``'s raw
    path. Raises ValueError when ``nlp`` has no ``component``."""
    if component not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {component!r} component (it has {nlp.pipe_names})")
    pipe = nlp.get_pipe(component)
    docs = list(nlp.pipe((p.fragment for p in passages), batch_size=batch_size))
    key = getattr(pipe, "spans_key", FIGURATIVE_UNITS_KEY)
    scores = score_unit_sets([(gold_units(p), doc_units(d, key)) for p, d in zip(passages, docs)])
    scores.update(classification_given_units(pipe, docs, passages))
    scores["clause_alignment"] = clause_alignment(docs, passages)
    scores["passages"] = len(passages)
    return scores


def headline(scores: Dict[str, Any]) -> List[tuple]:
    """Rows ``(figure, ours, paper model, paper figure)`` for a table."""
    rows = []
    for key, (model, value) in PAPER.items():
        ours = scores.get(key)
        rows.append((key, f"{100 * ours:.2f}" if ours is not None else "-", model, f"{value:.2f}"))
    for key in ("extraction_p", "extraction_r", "recognition_p", "recognition_r", "overlap_p", "overlap_r", "overlap_f"):
        rows.append((key, f"{100 * scores[key]:.2f}", "", ""))
    return rows
