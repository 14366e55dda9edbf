"""Training readers: gold-word Examples, and several corpora in one run.

``spacy_rhetoric.Corpora.v1`` reads one or more DocBins (e.g. the simile
corpus and PSE-I) and builds Examples whose predicted doc has the gold words
(CERD and PSE-I are evaluated on gold tokenisation, DESIGN §2). Unlike
``spacy.Corpus.v1`` with ``gold_preproc``, it does not cut docs into
sentences, so doc-level user data (``rhetoric_annotated``) and span groups
that cross sentences (parallelisms) survive.

The corpora may annotate different labels: each doc carries
``user_data["rhetoric_annotated"]`` and the components mask what a doc does
not annotate, so nothing has to be relabelled when corpora are combined.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import registry

from ..errors import Errors


def gold_word_example(nlp: Language, reference: Doc, gold_sents: bool = False) -> Example:
    """Example whose predicted doc has the reference's words and spaces (and
    its sentence starts when ``gold_sents``), without any other annotation."""
    sent_starts = None
    if gold_sents and reference.has_annotation("SENT_START"):
        sent_starts = [bool(t.is_sent_start) for t in reference]
    predicted = Doc(
        nlp.vocab,
        words=[t.text for t in reference],
        spaces=[bool(t.whitespace_) for t in reference],
        sent_starts=sent_starts,
    )
    return Example(predicted, reference)


def _docbin_files(path: Union[str, Path]) -> List[Path]:
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.spacy"))
    elif path.exists():
        files = [path]
    else:
        raise ValueError(Errors.R201.format(path=path))
    if not files:
        raise ValueError(Errors.R202.format(path=path))
    return files


def crop_parallelisms(doc: Doc) -> List[Doc]:
    """One doc per in-paragraph parallelism of ``doc``: the sentences from
    its first branch's to its last branch's, alone, with every parallelism
    that lies wholly inside them. A crop declares that it annotates
    parallelism only (``user_data["rhetoric_annotated"]``), so no other
    component learns from it. A doc without sentence boundaries, or a
    parallelism whose sentences are the whole doc, gives no crop."""
    from ..spangroups import IN_PARAGRAPH, parallelism_offsets, set_parallelisms

    groups = parallelism_offsets(doc, kind=IN_PARAGRAPH)
    if not groups or not doc.has_annotation("SENT_START"):
        return []
    crops, seen = [], set()
    for group in groups:
        start, end = doc[group[0][0]].sent.start, doc[group[-1][1] - 1].sent.end
        if (start, end) in seen or (start, end) == (0, len(doc)):
            continue
        seen.add((start, end))
        crop = doc[start:end].as_doc()  # words, spaces and sentence starts; no span groups, no user data
        inside = [[(s - start, e - start) for s, e in g] for g in groups if g[0][0] >= start and g[-1][1] <= end]
        set_parallelisms(crop, inside)
        crop.user_data.update({k: v for k, v in doc.user_data.items() if k in ("essay_id", "para_id", "corpus")})
        crop.user_data["rhetoric_annotated"] = {"coarse": ("parallelism",), "form": (), "content": (), "components": ()}
        crops.append(crop)
    return crops


@registry.readers("spacy_rhetoric.Corpora.v1")
def create_corpora_reader(
    paths: Union[Dict[str, str], List[str]],
    gold_sents: bool = False,
    shuffle: bool = False,
    limit: int = 0,
    skip_seen: Sequence[str] = (),
    exclude: Union[str, Sequence[str], None] = (),
    parallelism_crops: bool = False,
) -> Callable[[Language], Iterator[Example]]:
    """Reader yielding gold-word Examples of every DocBin in ``paths``
    (files, or folders read recursively), corpus after corpus.

    paths: ``{corpus name: path}`` (in a config, a ``[corpora.train.paths]``
        block with one ``name = ${paths.x}`` line per corpus) or a list.
    gold_sents: copy the reference sentence starts onto the predicted doc
        (use for dev sets of multi-sentence docs without a sentence splitter).
    shuffle: shuffle the docs of each pass (spaCy's batcher does not).
    limit: at most this many docs per path (0 = all).
    skip_seen: ``doc.user_data`` keys (e.g. ``["essay_id", "para_id"]``):
        a doc whose values of all these keys were already read from an
        earlier path is skipped, so a corpus that annotates more of the same
        text (the team-annotated PSE-I essays) can be listed before the one
        it extends (PSE-I) without training on a paragraph twice.
    exclude: a DocBin path or a list of them whose docs (identified by
        ``skip_seen``) are never read, e.g. the held-out dev essays of a
        corpus listed in ``paths``.
    parallelism_crops: after each doc with in-paragraph parallelisms, also
        yield :func:`crop_parallelisms` of it (each parallelism's sentences
        alone, annotating parallelism only), so the linker learns to find
        branches without the paragraph around them, as in a sentence a user
        or the generator gives alone.
    Raises ValueError for an empty ``paths`` or a path without DocBins.
    """
    if not paths:
        raise ValueError(Errors.R203)
    if isinstance(exclude, str):
        exclude = [exclude]
    exclude = list(exclude or ())
    files = [_docbin_files(p) for p in (paths.values() if isinstance(paths, dict) else paths)]

    excluded: List[set] = []  # read once: spaCy calls the reader every epoch

    def read(nlp: Language) -> Iterator[Example]:
        examples: List[Example] = []
        if skip_seen and not excluded:
            excluded.append({
                tuple(doc.user_data.get(k) for k in skip_seen)
                for path in exclude for f in _docbin_files(path)
                for doc in DocBin().from_disk(f).get_docs(nlp.vocab)
            })
        seen: set = set(excluded[0]) if excluded else set()
        for group in files:
            n, read_here = 0, set()
            for f in group:
                for doc in DocBin().from_disk(f).get_docs(nlp.vocab):
                    if len(doc) == 0 or (limit and n >= limit):
                        continue
                    key = tuple(doc.user_data.get(k) for k in skip_seen) if skip_seen else None
                    if key is not None and None not in key:
                        if key in seen:
                            continue
                        read_here.add(key)
                    examples.append(gold_word_example(nlp, doc, gold_sents))
                    if parallelism_crops:
                        examples.extend(gold_word_example(nlp, crop, gold_sents) for crop in crop_parallelisms(doc))
                    n += 1
            seen |= read_here
        if shuffle:
            random.shuffle(examples)
        yield from examples

    return read
