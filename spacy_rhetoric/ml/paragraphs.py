"""Encode each paragraph of a doc on its own.

Every training corpus of the pipeline holds one paragraph per Doc (PSE-I,
PSE-I CERD) or one sentence (simile, CMC), but users analyse whole essays.
An encoder that reads across a line break sees contexts it was never trained
on, and a heading line inherits the labels of the paragraph below it (essay
328 of PSE-I test: the title 绚丽的人生 scored metaphor 0.99, the device of
the next paragraph). Encoding paragraph by paragraph makes a whole essay look
like its training data, and a paragraph gets the same vectors whether it is
analysed alone or inside its essay.

- ``spacy_rhetoric.ParagraphTok2Vec.v1`` is ``spacy.Tok2Vec.v2`` (embed,
  then encode) run on paragraphs: each doc with line breaks is cut into
  paragraph docs, embed and encode run on all of them as one batch, and the
  outputs are concatenated back per doc. A doc without a line break goes
  through unchanged, so on single-paragraph docs the outputs are exactly
  those of ``spacy.Tok2Vec.v2`` with the same weights.
- ``spacy_rhetoric.paragraph_strided_spans.v1`` is the same idea for
  spacy-transformers: ``strided_spans`` windows inside each paragraph.

A doc is encoded in pieces: each paragraph, and apart from it each run of
whitespace tokens holding a line break, so a paragraph is encoded exactly as
the same text without the line break (the form of the training docs); every
token belongs to exactly one piece.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Tuple

from spacy.tokens import Doc, Span
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..errors import Errors


def paragraph_bounds(doc: Doc) -> List[Tuple[int, int]]:
    """Token ranges ``[(start, end), ...]`` of the pieces ``doc`` is encoded
    in, covering every token once, in order: each paragraph, and apart from
    it each run of whitespace tokens that holds a line break (a training
    doc never ends with one)."""
    bounds: List[Tuple[int, int]] = []
    start, i, n = 0, 0, len(doc)
    while i < n:
        if doc[i].is_space and "\n" in doc[i].text:
            j = i + 1
            while j < n and doc[j].is_space:
                j += 1
            # spaces just before the line break go into its piece
            k = i
            while k > start and doc[k - 1].is_space:
                k -= 1
            if k > start:
                bounds.append((start, k))
            bounds.append((k, j))
            start = i = j
        else:
            i += 1
    if start < n or not bounds:
        bounds.append((start, n))
    return bounds


@registry.architectures("spacy_rhetoric.ParagraphTok2Vec.v1")
def build_paragraph_tok2vec(
    embed: Model[List[Doc], List[Floats2d]], encode: Model[List[Floats2d], List[Floats2d]]
) -> Model[List[Doc], List[Floats2d]]:
    """``spacy.Tok2Vec.v2`` (``embed`` then ``encode``) applied to each
    paragraph separately; one Floats2d (n_tokens, width) per doc.

    The model has the node layout of ``spacy.Tok2Vec.v2`` (one node whose
    layers are ``embed`` and ``encode``, refs ``embed``/``encode``), so the
    weights of a pipeline trained with ``spacy.Tok2Vec.v2`` load unchanged
    when its config names this architecture instead.
    """
    model: Model[List[Doc], List[Floats2d]] = Model(
        "paragraph_tok2vec",
        _forward,
        init=_init,
        layers=[embed, encode],
        refs={"embed": embed, "encode": encode},
        dims={"nO": encode.get_dim("nO") if encode.has_dim("nO") else None},
        attrs={"receptive_field": encode.attrs.get("receptive_field", 0)},
    )
    return model


def _split(docs: List[Doc]) -> Tuple[List[Doc], List[int]]:
    """Paragraph docs of ``docs`` and how many each doc contributed."""
    pieces: List[Doc] = []
    counts: List[int] = []
    for doc in docs:
        bounds = paragraph_bounds(doc)
        if len(bounds) == 1:
            pieces.append(doc)
        else:
            pieces.extend(doc[a:b].as_doc() for a, b in bounds)
        counts.append(len(bounds))
    return pieces, counts


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    pieces, counts = _split(docs)
    X: Any = pieces
    callbacks = []
    for layer in model.layers:  # embed, then encode (chain's forward)
        X, backprop_layer = layer(X, is_train)
        callbacks.append(backprop_layer)
    xp = model.ops.xp
    Y: List[Floats2d] = []
    k = 0
    for n in counts:
        Y.append(X[k] if n == 1 else xp.concatenate(X[k : k + n], axis=0))
        k += n

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        dX: Any = []
        k = 0
        for d, n in zip(dY, counts):
            if n == 1:
                dX.append(d)
            else:
                offsets = xp.cumsum(xp.asarray([len(p) for p in pieces[k : k + n]]))[:-1].tolist()
                dX.extend(xp.split(d, offsets, axis=0))
            k += n
        for callback in reversed(callbacks):
            dX = callback(dX)
        return []

    return Y, backprop


def _init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[List[Floats2d]] = None) -> Model:
    current: Any = _split(X)[0] if X is not None else None
    for layer in model.layers:
        layer.initialize(X=current)
        current = layer.predict(current) if current is not None else None
    encode = model.layers[-1]
    if encode.has_dim("nO") and encode.get_dim("nO") is not None:
        model.set_dim("nO", encode.get_dim("nO"))
    return model


def configure_paragraph_strided_spans(window: int, stride: int) -> Callable[[Iterable[Doc]], List[List[Span]]]:
    """spacy-transformers span getter: windows of ``window`` tokens every
    ``stride`` tokens (as ``spacy-transformers.strided_spans.v1``), restarted
    at every paragraph, so no window reads across a line break. Registered
    through the ``spacy_span_getters`` entry point (the registry belongs to
    spacy-transformers). Raises ``ValueError`` when ``stride > window``."""
    if stride > window:
        raise ValueError(Errors.R204.format(stride=stride, window=window))

    def get_spans(docs: Iterable[Doc]) -> List[List[Span]]:
        out = []
        for doc in docs:
            spans = []
            for a, b in paragraph_bounds(doc):
                start = a
                while True:
                    spans.append(doc[start : min(start + window, b)])
                    if start + window >= b:
                        break
                    start += stride
            out.append([s for s in spans if len(s)])
        return out

    return get_spans
