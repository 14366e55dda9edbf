"""Checks shared by the component contract tests (``test_contract_*.py``).

Every contract test builds its pipeline the way a user does: a blank ``zh``
pipeline (spaCy's character segmentation), ``nlp.add_pipe(<factory name>,
config=...)`` with small widths, and inline Chinese examples written in the
test module in the component's own gold format. Nothing here reads
``../shared/data``, so the contracts run in any clone. The checks follow
spaCy's own pipeline tests (``spacy/tests/pipeline/test_spancat.py``:
``test_overfitting_IO``, the ``to_bytes``/``from_bytes`` round trip and
``test_initialize_examples``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import fix_random_seed, registry

#: Output summary of one processed doc (spans, labels, probabilities): what
#: two pipelines must agree on.
Output = Callable[[Doc], Any]
#: Small widths for the default ``spacy.Tok2Vec.v2`` (MultiHashEmbed and
#: MaxoutWindowEncoder) of the contract pipelines that train one.
SMALL_TOK2VEC = {"embed": {"width": 32, "rows": [500, 200, 200]}, "encode": {"width": 32, "depth": 1}}
#: Inputs of a pipeline: strings, or a function returning fresh Docs for a
#: given pipeline (e.g. of given words).
Texts = Union[Sequence[str], Callable[[Language], List[Doc]]]


def _docs(nlp: Language, texts: Texts) -> List[Doc]:
    """``nlp.pipe`` over ``texts`` (strings, or a function giving Docs for ``nlp``)."""
    return list(nlp.pipe(texts(nlp) if callable(texts) else list(texts)))


def train(
    nlp: Language, name: str, examples: List[Example], n_iter: int, learn_rate: Optional[float] = None, **update_kwargs
) -> List[float]:
    """``nlp.initialize`` on ``examples``, then ``n_iter`` ``nlp.update``
    calls on all of them without dropout, with the optimizer
    ``nlp.initialize`` returns (Adam, its learn rate set to ``learn_rate``
    when given); returns ``name``'s loss per update."""
    optimizer = nlp.initialize(lambda: examples)
    if learn_rate is not None:
        optimizer.learn_rate = learn_rate
    history = []
    for _ in range(n_iter):
        losses: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=losses, drop=0.0, **update_kwargs)
        history.append(losses[name])
    return history


def overfit(
    make_nlp: Callable[[], Language],
    make_examples: Callable[[Language], List[Example]],
    name: str,
    n_iter: int,
    learn_rate: Optional[float] = None,
    **update_kwargs,
) -> Tuple[Language, List[float]]:
    """A fresh pipeline from ``make_nlp()`` after ``fix_random_seed(0)``,
    trained by :func:`train` on ``make_examples(nlp)``; returns the pipeline
    and ``name``'s loss per update (what the modules' ``trained`` fixtures
    hold)."""
    fix_random_seed(0)
    nlp = make_nlp()
    return nlp, train(nlp, name, make_examples(nlp), n_iter, learn_rate, **update_kwargs)


def initialized(nlp: Language, name: str, make_examples: Callable[[Language], List[Example]]):
    """``nlp.initialize`` on ``make_examples(nlp)``; returns the component
    ``name`` (whose labels the examples set)."""
    nlp.initialize(lambda: make_examples(nlp))
    return nlp.get_pipe(name)


def assert_overfits(
    nlp: Language,
    texts: Texts,
    found: Output,
    gold: Iterable[Any],
    examples: Iterable[Example],
    score_keys: Iterable[str],
) -> Dict[str, Any]:
    """``found(doc)`` of ``nlp``'s doc for each of ``texts`` equals the
    matching entry of ``gold``, and ``nlp.evaluate`` on ``examples`` gives
    1.0 for each of ``score_keys``. Returns the scores."""
    for doc, expected in zip(_docs(nlp, texts), gold):
        assert found(doc) == expected, doc.text
    scores = nlp.evaluate(list(examples))
    for key in score_keys:
        assert scores[key] == 1.0, key
    return scores


def assert_loss_falls(history: Sequence[float], factor: float = 0.1) -> None:
    """The last loss is below ``factor`` times the first, and the loss of
    the second update is already below the first (the first update moved
    the weights the right way)."""
    assert history[0] > 0.0, history[:3]
    assert history[1] < history[0], history[:3]
    assert history[-1] < factor * history[0], (history[0], history[-1])


def assert_initialize_changes_nothing(nlp: Language, texts: Texts, output: Output) -> None:
    """``nlp.initialize()`` without examples leaves ``nlp``'s output on
    ``texts`` as it was (for components that learn nothing)."""
    before = [output(doc) for doc in _docs(nlp, texts)]
    nlp.initialize()
    assert [output(doc) for doc in _docs(nlp, texts)] == before


def assert_round_trips(nlp: Language, texts: Texts, output: Output, tmp_path: Path) -> None:
    """``nlp``'s output on ``texts`` (strings, or a function returning fresh
    Docs for a pipeline, e.g. of given words) is the same after

    - ``nlp.to_disk`` and ``spacy.load`` (the whole pipeline from disk);
    - ``nlp.to_bytes`` into a fresh pipeline built from ``nlp.config``;
    - the components' own ``to_bytes``/``from_bytes`` and
      ``to_disk``/``from_disk`` into fresh components of that pipeline.
    """
    before = [output(doc) for doc in _docs(nlp, texts)]

    nlp.to_disk(tmp_path / "pipeline")
    from_disk = spacy.load(tmp_path / "pipeline")
    assert from_disk.pipe_names == nlp.pipe_names
    assert [output(doc) for doc in _docs(from_disk, texts)] == before

    from_bytes = spacy.util.load_model_from_config(nlp.config, auto_fill=True, validate=True)
    from_bytes.from_bytes(nlp.to_bytes())
    assert [output(doc) for doc in _docs(from_bytes, texts)] == before

    by_bytes = spacy.util.load_model_from_config(nlp.config, auto_fill=True, validate=True)
    by_disk = spacy.util.load_model_from_config(nlp.config, auto_fill=True, validate=True)
    for name, pipe in nlp.pipeline:
        if hasattr(pipe, "to_bytes"):
            by_bytes.get_pipe(name).from_bytes(pipe.to_bytes())
            pipe.to_disk(tmp_path / f"component_{name}")
            by_disk.get_pipe(name).from_disk(tmp_path / f"component_{name}")
    assert [output(doc) for doc in _docs(by_bytes, texts)] == before
    assert [output(doc) for doc in _docs(by_disk, texts)] == before


def assert_scorer_keys(nlp: Language, name: str, examples: Iterable[Example], scorer_name: str) -> Dict[str, Any]:
    """The component's scorer is the registered ``scorer_name`` and
    ``nlp.evaluate`` returns every key its factory declares in
    ``default_score_weights`` (the keys ``spacy train`` reads). Returns the
    scores."""
    pipe = nlp.get_pipe(name)
    assert nlp.config["components"][name]["scorer"] == {"@scorers": scorer_name}
    assert pipe.scorer is registry.scorers.get(scorer_name)()
    documented = set(nlp.get_pipe_meta(name).default_score_weights)
    assert documented, f"{name} declares no score keys"
    scores = nlp.evaluate(list(examples))
    assert documented <= set(scores), sorted(documented - set(scores))
    return scores


def assert_needs_initialize(nlp: Language, name: str, text: str, match: Optional[str] = "E109"):
    """An uninitialized ``nlp`` refuses ``text`` with a ValueError (matching
    ``match``; spaCy's E109 for an unset model), and the component ``name``
    passes :func:`assert_initialize_checks_get_examples`. Returns it."""
    with pytest.raises(ValueError, match=match):
        nlp(text)
    pipe = nlp.get_pipe(name)
    assert_initialize_checks_get_examples(pipe, nlp)
    return pipe


def assert_initialize_checks_get_examples(pipe, nlp: Language) -> None:
    """The component's ``initialize`` refuses a ``get_examples`` that is not
    a callable returning Examples, as spaCy's own components do
    (E930 for no iterable, E978 for Docs instead of Examples)."""
    with pytest.raises(TypeError, match="E930"):
        pipe.initialize(lambda: None, nlp=nlp)
    with pytest.raises(TypeError, match="E978"):
        pipe.initialize(lambda: [nlp.make_doc("天很蓝。")], nlp=nlp)
