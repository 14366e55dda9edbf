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

Without the entry points, ``get_all`` still copies catalogue's whole
``REGISTRY`` (some 260 entries of every namespace) and compares each key
with the codecs' namespace, about 0.1 ms a call. Those registries then get
a ``get_all`` that keeps the last answer (:class:`RegistryScan`) and scans
again only when catalogue's ``REGISTRY`` holds other keys or another
object under one of the answer's. On the 42 analysed PSE-I test essays ``Doc.to_bytes``
took 0.05 s instead of 0.13 s and ``Doc.from_bytes`` 0.04 s instead of
0.12 s, with the same bytes.

Enable it in a pipeline's config::

    [nlp.after_creation]
    @callbacks = "spacy_rhetoric.msgpack_codecs_once.v1"
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import catalogue
import srsly
from spacy.language import Language
from spacy.util import registry


class RegistryScan:
    """A catalogue registry's ``get_all`` (entry points off) that remembers
    its last answer.

    The answer is computed again when catalogue's ``REGISTRY`` holds other
    keys (or the same in another order) or another object under one of the
    answer's keys: every change that could change the answer. Reading the
    keys costs a few microseconds where the scan cost about 0.1 ms. Each call
    returns a new dict, as catalogue's does; with ``entry_points`` set again
    it is catalogue's ``get_all``.
    """

    def __init__(self, codecs: catalogue.Registry) -> None:
        self.codecs = codecs
        self.namespace = tuple(codecs.namespace)
        self._keys: Optional[Tuple[Tuple[str, ...], ...]] = None
        self._entries: Dict[str, Any] = {}

    def _unchanged(self, keys: Tuple[Tuple[str, ...], ...]) -> bool:
        table = catalogue.REGISTRY
        return keys == self._keys and all(
            table[self.namespace + (name,)] is value for name, value in self._entries.items()
        )

    def __call__(self) -> Dict[str, Any]:
        if self.codecs.entry_points:  # switched back on: catalogue's own answer
            return catalogue.Registry.get_all(self.codecs)
        keys = tuple(catalogue.REGISTRY)
        if not self._unchanged(keys):
            self._entries = catalogue.Registry.get_all(self.codecs)
            self._keys = keys
        return dict(self._entries)


def look_up_msgpack_codecs_once() -> List[str]:
    """Stop srsly's msgpack encoder and decoder registries from reading the
    entry points on every call when no distribution declares one, and give
    them a :class:`RegistryScan` as their ``get_all``. Returns the namespaces
    now read from memory only (e.g. ``["srsly.msgpack_encoders"]``); a
    registry with declared entry points is left as it was."""
    stopped = []
    for codecs in (srsly.msgpack_encoders, srsly.msgpack_decoders):
        if codecs.entry_points and not codecs.get_entry_points():
            codecs.entry_points = False
            codecs.get_all = RegistryScan(codecs)
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
