"""The parallelism linker alone on the raw path, for choices made on dev.

:func:`spacy_rhetoric.evaluation.raw_path.evaluate_raw` runs the whole
pipeline on every corpus; a change to the linker (its weights, its encoder,
its ``o_bias``) needs only the components up to the linker, and one Viterbi
decoding per bias. :func:`linker_scores_raw` runs the components before the
linker once on the texts read as raw text (the user's path: the pipeline's
own tokenizer, paragraphs joined by line breaks), then the linker once per
``o_bias``, and scores each decoding with
:func:`spacy_rhetoric.evaluation.raw_path.score_parallelism` (EPM, MPBM,
MBAWO, MWO on gold word offsets; Bothwell et al. 2023, §5 and Appendix B):
the same figures ``evaluate-raw`` reports for the parallelisms, since the
components after the linker do not change its branches.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from spacy.language import Language

from .raw_path import GoldDoc, read_gold, score_parallelism

LINKER = "parallelism_linker"


def linker_scores_raw(
    nlp: Language, gold: Sequence[GoldDoc], biases: Sequence[Optional[float]] = (None,), batch_size: int = 8
) -> Dict[str, Any]:
    """Parallelism scores of ``nlp``'s ``parallelism_linker`` on ``gold``
    read as raw text, once per ``o_bias`` in ``biases`` (None: the
    pipeline's own). Only the texts with parallelism gold are read.

    Returns ``{"texts", "seconds", "own_o_bias", "scores": {bias: scores}}``,
    scores as :func:`~spacy_rhetoric.evaluation.raw_path.score_parallelism`
    (keys ``epm``, ``mpbm``, ``mbawo``, ``mwo``, each ``p``/``r``/``f``), the
    bias keys as strings (``"0.35"``). The linker's ``o_bias`` is left as it
    was. Raises ValueError without a ``parallelism_linker`` or without
    parallelism gold.
    """
    from ..analysis.records import doc_to_record, single_torch_thread
    from .util import apply_component

    if LINKER not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {LINKER}: {nlp.pipe_names}")
    gold = [g for g in gold if g.parallelisms is not None and g.words is not None]
    if not gold:
        raise ValueError("no text annotates parallelism")
    linker = nlp.get_pipe(LINKER)
    own = float(linker.cfg.get("o_bias", 0.0))
    t0 = time.perf_counter()
    scores: Dict[str, Any] = {}
    try:
        with single_torch_thread():
            before = list(nlp.pipe((g.text for g in gold), batch_size=batch_size,
                                   disable=nlp.pipe_names[nlp.pipe_names.index(LINKER):]))
            for bias in biases:
                value = own if bias is None else float(bias)
                linker.cfg["o_bias"] = value
                # the linker replaces its own span groups: the same docs serve every bias
                docs = apply_component(linker, before, batch_size)
                records = [doc_to_record(d, g.id) for d, g in zip(docs, gold)]
                scores[f"{value:g}"] = score_parallelism(gold, records)
    finally:
        linker.cfg["o_bias"] = own
    return {"texts": len(gold), "seconds": round(time.perf_counter() - t0, 1), "own_o_bias": own, "scores": scores}


def evaluate_linker_raw(
    model: Union[str, Path, Language],
    *,
    corpus: str = "pse-i-cerd",
    split: str = "dev",
    shared: Path = Path("../shared/data"),
    annotations: Path = Path("annotations/pse-i-cerd"),
    biases: Sequence[Optional[float]] = (None,),
    batch_size: int = 8,
    output: Optional[Path] = None,
) -> Dict[str, Any]:
    """Load ``model`` (only the components up to its linker), read
    ``corpus``'s ``split`` with :func:`~spacy_rhetoric.evaluation.raw_path.read_gold`
    and return :func:`linker_scores_raw` with ``model``, ``version``,
    ``corpus`` and ``split`` added; written as JSON to ``output``. Raises
    OSError for a missing pipeline or data, ValueError as
    :func:`linker_scores_raw` and for an unknown corpus."""
    import spacy

    if isinstance(model, Language):
        nlp = model
    else:
        names = spacy.util.load_config(Path(model) / "config.cfg")["nlp"]["pipeline"] if Path(model).is_dir() else None
        after = names[names.index(LINKER) + 1:] if names and LINKER in names else []
        nlp = spacy.load(model, exclude=after)
    gold = read_gold(corpus, shared, annotations, split)
    result = {"model": str(model) if not isinstance(model, Language) else nlp.meta.get("name"),
              "version": nlp.meta.get("version"), "corpus": corpus, "split": split,
              **linker_scores_raw(nlp, gold, biases, batch_size)}
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf8")
    return result


def score_rows(result: Dict[str, Any]) -> List[tuple]:
    """Table rows ``(o_bias, EPM F1, MPBM F1, MBAWO F1, MWO F1, EPM P, EPM R)``
    of a :func:`linker_scores_raw` result, figures to three decimals."""
    rows = []
    for bias, s in result["scores"].items():
        rows.append((bias, *(f"{s[m]['f']:.3f}" for m in ("epm", "mpbm", "mbawo", "mwo")),
                     f"{s['epm']['p']:.3f}", f"{s['epm']['r']:.3f}"))
    return rows
