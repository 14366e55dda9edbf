"""``spacy_rhetoric.ProbabilityAverage.v1``: two span classifiers, one output.

Two classifiers that score the same spans with the same labels (in the same
column order) and output probabilities are combined by a weighted mean:

    P(label | span) = (1 - w) * P_first(label | span) + w * P_second(label | span)

the linear opinion pool (Stone 1961; as in Dietterich 2000, "Ensemble
Methods in Machine Learning", §2, averaging the members' outputs). In
``zh_rhetoric_trf`` the first is the transformer's sentence classifier and
the second the static-vector CNN/BiLSTM classifier of ``zh_rhetoric`` with
its own copy of that encoder (spaCy's ``replace_listeners``), ``w`` = 0.3,
chosen on the PSE-I CERD and simile dev splits (``docs/training.md``).
"""
from __future__ import annotations

from typing import Callable, List, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Ragged

InT = Tuple[List[Doc], Ragged]


@registry.architectures("spacy_rhetoric.ProbabilityAverage.v1")
def build_probability_average(first: Model[InT, Floats2d], second: Model[InT, Floats2d],
                              second_weight: float) -> Model[InT, Floats2d]:
    """The weighted mean of two span classifiers' probabilities.

    first, second: ``(docs, spans)`` -> Floats2d (n_spans, n_labels) of
        probabilities, the same spans and label columns (e.g.
        ``spacy.SpanCategorizer.v1`` models with the same suggester).
    second_weight: ``w`` in [0, 1], the second model's share.
    Returns a model with the same input and output; in training each member
    gets its share of the gradient (``(1 - w) dY`` and ``w dY``).
    Raises ValueError for a weight outside [0, 1].
    """
    weight = float(second_weight)
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"second_weight must be in [0, 1], got {second_weight}")
    return Model(
        "probability_average",
        _forward,
        layers=[first, second],
        attrs={"second_weight": weight},
        init=_init,
        dims={"nO": first.maybe_get_dim("nO")},
    )


def _init(model: Model, X=None, Y=None) -> None:
    for layer in model.layers:
        layer.initialize(X=X, Y=Y)
    model.set_dim("nO", model.layers[0].get_dim("nO"))


def _forward(model: Model[InT, Floats2d], X: InT, is_train: bool) -> Tuple[Floats2d, Callable]:
    weight = model.attrs["second_weight"]
    first, second = model.layers
    Y1, backprop1 = first(X, is_train)
    Y2, backprop2 = second(X, is_train)
    if Y1.shape != Y2.shape:
        raise ValueError(f"the two classifiers disagree on the output shape: {Y1.shape} vs {Y2.shape}")
    Y = (1.0 - weight) * Y1 + weight * Y2

    def backprop(dY: Floats2d):
        dX = backprop1((1.0 - weight) * dY)
        backprop2(weight * dY)
        return dX

    return Y, backprop
