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
    # The embedding is per word, so the whole docs are embedded at once and
    # only the encoder (CNN, BiLSTM), which reads context, runs per paragraph.
    embed, encode = model.layers
    E, backprop_embed = embed(docs, is_train)
    bounds = [paragraph_bounds(doc) for doc in docs]
    pieces = [e[a:b] for e, doc_bounds in zip(E, bounds) for a, b in doc_bounds]
    X, backprop_encode = encode(pieces, is_train)
    xp = model.ops.xp
    Y: List[Floats2d] = []
    k = 0
    for doc_bounds in bounds:
        n = len(doc_bounds)
        Y.append(X[k] if n == 1 else xp.concatenate(X[k : k + n], axis=0))
        k += n

    def backprop(dY: List[Floats2d]) -> List[Doc]:
        d_pieces: Any = []
        for d, doc_bounds in zip(dY, bounds):
            d_pieces.extend(d[a:b] for a, b in doc_bounds)
        d_encoded = backprop_encode(d_pieces)
        dE: Any = []
        k = 0
        for doc_bounds in bounds:
            n = len(doc_bounds)
            dE.append(d_encoded[k] if n == 1 else xp.concatenate(d_encoded[k : k + n], axis=0))
            k += n
        return backprop_embed(dE)

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
