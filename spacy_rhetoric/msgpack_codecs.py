"""srsly's msgpack codecs looked up once per process, not once per call.

``nlp.pipe(texts, n_process=N)`` sends every doc from its worker to the
parent as ``Doc.to_bytes`` and rebuilds it there with ``Doc.from_bytes``.
Each of a doc's span groups and its ``user_data`` is one
``srsly.msgpack_dumps`` (``msgpack_loads`` in the parent). Every such call
asks catalogue for srsly's registered encoders (decoders), and catalogue
2.0's ``Registry.get_all`` reads the ``srsly.msgpack_encoders``
(``_decoders``) entry points of every installed distribution each time.
Our docs carry ten or more span groups (``clauses``, ``rhetoric`` and its
form and content levels, ``rhetoric_components``, ``parallelism`` and one
``parallelism_N`` per parallelism). On the 42 PSE-I test essays, with 191
distributions installed, those lookups took about 0.12 s of the 0.25 s
that ``to_bytes`` took, and as much again of ``from_bytes``: time the
parent spends on one of two cores while the workers analyse.

When no installed distribution declares such an entry point, the
registries are told to stop looking (``Registry.entry_points = False``):
``get_all`` then returns exactly what it returned before, from memory. The
one difference is a package installed into the running environment later
whose entry point would register a msgpack codec: it is seen by the next
process, not this one. When some distribution does declare one, nothing is
changed. The state is per process; fork workers inherit it.

Enable it in a pipeline's config::

    [nlp.after_creation]
    @callbacks = "spacy_rhetoric.msgpack_codecs_once.v1"
"""
from __future__ import annotations

from typing import Callable, List

import srsly
from spacy.language import Language
from spacy.util import registry


def look_up_msgpack_codecs_once() -> List[str]:
    """Stop srsly's msgpack encoder and decoder registries from reading the
    entry points on every call when no distribution declares one. Returns
    the namespaces now read from memory only (e.g. ``["srsly.msgpack_encoders"]``);
    a registry with declared entry points is left as it was."""
    stopped = []
    for codecs in (srsly.msgpack_encoders, srsly.msgpack_decoders):
        if codecs.entry_points and not codecs.get_entry_points():
            codecs.entry_points = False
            stopped.append(".".join(codecs.namespace))
    return stopped


@registry.callbacks("spacy_rhetoric.msgpack_codecs_once.v1")
def make_msgpack_codecs_once() -> Callable[[Language], Language]:
    """An ``[nlp.after_creation]`` callback: :func:`look_up_msgpack_codecs_once`,
    then the ``nlp`` unchanged."""

    def look_up_once(nlp: Language) -> Language:
        look_up_msgpack_codecs_once()
        return nlp

    return look_up_once
