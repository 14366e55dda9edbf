"""Training of the ``figurative_units`` component on a shipped pipeline.

The component reads what the pipeline's other components write
(``doc.tensor``, the clauses, the sentence devices, branches and
components) and trains nothing else, so the pipeline's components before it
are frozen and annotating (spaCy's ``frozen_components`` plus
``annotating_components``). Their output does not change between epochs,
so it is computed once: every passage goes through the pipeline once as raw
text (the raw path), and the component is then trained with its own
``update`` on those docs. Model choice (epoch, then ``o_bias``) is made on
the dev passages only.
"""
from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import spacy
from spacy.training import Example
from spacy.util import fix_random_seed, minibatch
from thinc.api import Adam

from ..corpora.configure import Passage, passage_to_doc
from ..scorers.figurative_units import classification_given_units, doc_units, gold_units, score_unit_sets

NAME = "figurative_units"


def _score(nlp, pipe, docs, passages) -> Dict[str, Any]:
    pipe.set_annotations(docs, pipe.predict(docs))
    scores = score_unit_sets([(gold_units(p), doc_units(d, pipe.spans_key)) for p, d in zip(passages, docs)])
    scores.update(classification_given_units(pipe, docs, passages))
    return scores


def prepare(base: Union[str, Path], train: Sequence[Passage], dev: Sequence[Passage], log=print):
    """Load the pipeline at ``base`` (without a ``figurative_units``) and run
    it once over the passages: ``(nlp, train examples, dev docs)``."""
    nlp = spacy.load(base)
    if NAME in nlp.pipe_names:
        nlp.remove_pipe(NAME)
    log(f"pipeline {base}: {nlp.pipe_names}; {len(train)} train / {len(dev)} dev passages")
    blank = spacy.blank("zh")
    train_docs = list(nlp.pipe((p.fragment for p in train), batch_size=8))
    dev_docs = list(nlp.pipe((p.fragment for p in dev), batch_size=8))
    examples = [Example(d, passage_to_doc(blank, p)) for d, p in zip(train_docs, train)]
    return nlp, examples, dev_docs


def fit(
    nlp,
    examples: Sequence[Example],
    dev_docs: Sequence,
    dev: Sequence[Passage],
    *,
    component_config: Optional[Dict[str, Any]] = None,
    epochs: int = 40,
    patience: int = 10,
    batch_size: int = 8,
    learn_rate: float = 1e-3,
    dropout: float = 0.2,
    o_biases: Sequence[float] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0),
    b_biases: Sequence[float] = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0),
    select: str = "recognition_f",
    seed: int = 0,
    log=print,
) -> Dict[str, Any]:
    """Add a fresh ``figurative_units`` (``component_config``) to ``nlp``
    (replacing one it has), train it on ``examples``, keep the epoch with the
    best dev ``select`` score, then the ``o_bias`` of ``o_biases`` and then
    the ``b_bias`` of ``b_biases`` with the best dev ``select`` (the smaller
    on a tie). Returns ``{"history": [...], "best_epoch", "o_bias",
    "o_bias_scores", "b_bias", "b_bias_scores", "dev": scores}``."""
    fix_random_seed(seed)
    if NAME in nlp.pipe_names:
        nlp.remove_pipe(NAME)
    pipe = nlp.add_pipe(NAME, config=component_config or {})
    pipe.initialize(lambda: examples, nlp=nlp)
    optimizer = Adam(learn_rate)
    rng = random.Random(seed)
    history: List[Dict[str, Any]] = []
    best = (-1.0, 0, None)
    for epoch in range(1, epochs + 1):
        order = list(examples)
        rng.shuffle(order)
        losses: Dict[str, float] = {}
        for batch in minibatch(order, size=batch_size):
            pipe.update(batch, drop=dropout, sgd=optimizer, losses=losses)
        scores = _score(nlp, pipe, dev_docs, dev)
        row = {"epoch": epoch, "loss": losses.get(NAME, 0.0), **{k: scores[k] for k in
               ("extraction_f", "recognition_f", "recognition_macro_f", "classification_micro_f", "classification_macro_f", "overlap_f")}}
        history.append(row)
        log(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        if scores[select] > best[0]:
            best = (scores[select], epoch, pipe.to_bytes())
        elif epoch - best[1] >= patience:
            break
    pipe.from_bytes(best[2])
    bias_scores = {}
    for bias in o_biases:
        pipe.cfg["o_bias"] = float(bias)
        bias_scores[bias] = _score(nlp, pipe, dev_docs, dev)[select]
        log(f"o_bias={bias}: dev {select}={bias_scores[bias]:.4f}")
    pipe.cfg["o_bias"] = float(max(o_biases, key=lambda b: (bias_scores[b], -b)))
    b_scores = {}
    for bias in b_biases:
        pipe.cfg["b_bias"] = float(bias)
        b_scores[bias] = _score(nlp, pipe, dev_docs, dev)[select]
        log(f"b_bias={bias}: dev {select}={b_scores[bias]:.4f}")
    pipe.cfg["b_bias"] = float(max(b_biases, key=lambda b: (b_scores[b], -b)))
    dev_scores = _score(nlp, pipe, dev_docs, dev)
    return {"history": history, "best_epoch": best[1], "o_bias": pipe.cfg["o_bias"], "o_bias_scores": bias_scores,
            "b_bias": pipe.cfg["b_bias"], "b_bias_scores": b_scores, "dev": copy.deepcopy(dev_scores)}


def train_figurative_units(
    base: Union[str, Path],
    train: Sequence[Passage],
    dev: Sequence[Passage],
    output: Optional[Union[str, Path]] = None,
    log=print,
    **settings: Any,
) -> Dict[str, Any]:
    """:func:`prepare` then :func:`fit` (``settings``); saves the whole
    pipeline with the trained component to ``output`` when given."""
    nlp, examples, dev_docs = prepare(base, train, dev, log=log)
    result = fit(nlp, examples, dev_docs, dev, log=log, **settings)
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        nlp.to_disk(output)
    return result


def bump_patch(version: str) -> str:
    """``"0.4.4"`` -> ``"0.4.5"``; a version without three numeric parts
    gets ``".1"`` appended."""
    parts = version.split(".")
    if len(parts) == 3 and parts[2].isdigit():
        return ".".join([parts[0], parts[1], str(int(parts[2]) + 1)])
    return version + ".1"


def add_to_pipeline(source: Union[str, Path], target: Union[str, Path], name: str = NAME, version: Optional[str] = None) -> str:
    """Add (or replace) component ``name`` of the pipeline at ``source`` to
    the pipeline at ``target``, last in its pipeline, touching nothing else:
    the other components' files stay byte for byte as they are on disk now
    (re-saving a whole pipeline can rewrite them, e.g. a transformer's
    weights in another precision) and the vocab gains no string from the
    source (which has seen its training texts). Written are
    ``target/name/`` (the component without its vocab), the ``nlp.pipeline``
    list and ``[components.name]`` block of ``config.cfg`` (from the
    source's config) and ``meta.json`` (component lists, labels, patch
    version bumped, or set to ``version`` when given). The new pipeline is
    built in a copy beside ``target``, loaded once as a check, then swapped
    in. Returns the new version."""
    import shutil
    import tempfile

    import srsly
    from thinc.api import Config

    target = Path(target)
    src_nlp = spacy.load(source)
    pipe = src_nlp.get_pipe(name)
    config = Config().from_disk(target / "config.cfg", interpolate=False)
    src_config = Config().from_disk(Path(source) / "config.cfg", interpolate=False)
    pipeline = [p for p in config["nlp"]["pipeline"] if p != name] + [name]
    config["nlp"]["pipeline"] = pipeline
    config["components"][name] = src_config["components"][name]
    for key in ("o_bias", "b_bias"):
        # decoding settings chosen after training live in the component's cfg
        if key in pipe.cfg:
            config["components"][name][key] = pipe.cfg[key]
    meta = srsly.read_json(target / "meta.json")
    if "figurative units" not in meta.get("description", ""):
        meta["description"] = meta.get("description", "").rstrip(". ") + "; ConFiguRe figurative units (12 figure types)."
    meta["version"] = version if version is not None else bump_patch(meta.get("version", "0.0.0"))
    for key in ("pipeline", "components"):
        if key in meta:
            meta[key] = [p for p in meta[key] if p != name] + [name]
    meta.setdefault("labels", {})[name] = list(pipe.label_data)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    old = target.with_name(f".{target.name}.old")
    try:
        shutil.copytree(target, tmp, dirs_exist_ok=True)
        shutil.rmtree(tmp / name, ignore_errors=True)
        pipe.to_disk(tmp / name, exclude=["vocab"])
        config.to_disk(tmp / "config.cfg")
        srsly.write_json(tmp / "meta.json", meta)
        check = spacy.load(tmp)
        if check.pipe_names[-1] != name:
            raise ValueError(f"{tmp}: {name} is not the last component ({check.pipe_names})")
        if old.exists():
            shutil.rmtree(old)
        target.rename(old)
        tmp.rename(target)
    except BaseException:
        if not target.exists() and old.exists():
            old.rename(target)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old)
    return meta["version"]
