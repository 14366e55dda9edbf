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
  then encode) with the encoder run on paragraphs: each doc is embedded
  whole (the embedding reads one word at a time), its embedding is cut into
  paragraphs, the encoder runs on all of them as one batch, and the outputs
  are concatenated back per doc. A doc without a line break goes
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

from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

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
    n = len(doc)
    spaces = doc.to_array("IS_SPACE").astype(bool).tolist() if n else []
    # only whitespace tokens can hold a line break: look at their text alone
    breaks = [i for i, space in enumerate(spaces) if space and "\n" in doc[i].text]
    bounds: List[Tuple[int, int]] = []
    start = 0
    for i in breaks:
        if i < start:  # inside the whitespace run of an earlier break
            continue
        j = i + 1
        while j < n and spaces[j]:
            j += 1
        # spaces just before the line break go into its piece
        k = i
        while k > start and spaces[k - 1]:
            k -= 1
        if k > start:
            bounds.append((start, k))
        bounds.append((k, j))
        start = j
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


def cut(arrays: Sequence[Any], bounds: Sequence[Sequence[Tuple[int, int]]]) -> List[Any]:
    """Each doc's array (rows = tokens) cut at its :func:`paragraph_bounds`: one
    array per piece, the docs' pieces in order."""
    return [a[start:end] for a, doc_bounds in zip(arrays, bounds) for start, end in doc_bounds]


def join(pieces: Sequence[Any], bounds: Sequence[Sequence[Tuple[int, int]]], xp: Any) -> List[Any]:
    """The inverse of :func:`cut`: the pieces concatenated back per doc."""
    out: List[Any] = []
    k = 0
    for doc_bounds in bounds:
        n = len(doc_bounds)
        out.append(pieces[k] if n == 1 else xp.concatenate(pieces[k : k + n], axis=0))
        k += n
    return out


def _forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    # The embedding is per word, so the whole docs are embedded at once and
    # only the encoder (CNN, BiLSTM), which reads context, runs per paragraph.
    embed, encode = model.layers
    E, backprop_embed = embed(docs, is_train)
    bounds = [paragraph_bounds(doc) for doc in docs]
    X, backprop_encode = encode(cut(E, bounds), is_train)

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        return backprop_embed(join(backprop_encode(cut(dY, bounds)), bounds, model.ops.xp))

    return join(X, bounds, model.ops.xp), backprop


def _init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[List[Floats2d]] = None) -> Model:
    embed, encode = model.layers
    embed.initialize(X=X)
    pieces = cut(embed.predict(X), [paragraph_bounds(doc) for doc in X]) if X is not None else None
    encode.initialize(X=pieces)
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
