"""Clause and sentence boundary scores.

A boundary is the character offset where a clause (or sentence) ends, its
trailing whitespace excluded, for every clause but the last of a doc; using
characters makes the score independent of the tokenisation. Precision,
recall and F1 are micro-averaged over all docs (spaCy's ``PRFScore``).
"""
from __future__ import annotations

from typing import Dict, Iterable, Optional, Set

from spacy.scorer import PRFScore
from spacy.tokens import Span
from spacy.training import Example
from spacy.util import registry


def _end_char(span: Span) -> int:
    tokens = [t for t in span if not t.is_space]
    return (tokens[-1].idx + len(tokens[-1].text)) if tokens else span.start_char


def _boundaries(spans: Iterable[Span]) -> Set[int]:
    ends = sorted({_end_char(s) for s in spans})
    return set(ends[:-1])


def score_clauses(examples: Iterable[Example], spans_key: str = "clauses", **_) -> Dict[str, Optional[float]]:
    """``clause_boundary_{p,r,f}`` over examples whose reference has
    ``doc.spans[spans_key]``, ``sent_boundary_{p,r,f}`` over examples whose
    reference has sentence starts; None where no example had annotation."""
    clause, sent = PRFScore(), PRFScore()
    n_clause = n_sent = 0
    for eg in examples:
        gold, pred = eg.reference, eg.predicted
        if spans_key in gold.spans:
            n_clause += 1
            clause.score_set(_boundaries(pred.spans.get(spans_key, [])), _boundaries(gold.spans[spans_key]))
        if gold.has_annotation("SENT_START") and len(gold):
            n_sent += 1
            pred_sents = pred.sents if pred.has_annotation("SENT_START") else [pred[:]]
            sent.score_set(_boundaries(pred_sents), _boundaries(gold.sents))
    out: Dict[str, Optional[float]] = {}
    for name, prf, n in (("clause_boundary", clause, n_clause), ("sent_boundary", sent, n_sent)):
        for key, value in (("p", prf.precision), ("r", prf.recall), ("f", prf.fscore)):
            out[f"{name}_{key}"] = value if n else None
    return out


@registry.scorers("spacy_rhetoric.clause_scorer.v1")
def make_clause_scorer():
    return score_clauses
