"""The custom attributes spacy-rhetoric's components write, registered in
one place. Importing this module registers them once; the components that
write them import it.

``Span._.rhetoric``, on the sentences of ``doc.sents`` (DESIGN §6; written by
``rhetoric_textcat``, see
:class:`spacy_rhetoric.components.rhetoric_textcat.RhetoricTextCategorizer`
for the decoding), None until a component sets it::

    {"coarse": {label: p}, "form": {label: p}, "content": {label: p},
     "scores": {"coarse": {label: p}, "form": {label: p}, "content": {label: p}}}

- under ``"coarse"``, ``"form"`` and ``"content"``: the accepted labels of the
  sentence with their probabilities (``{"literal": p}`` for a literal
  sentence), the labels the sentence's entry in an analysis record holds and
  the spans of ``doc.spans["rhetoric"]``, ``["rhetoric_form"]`` and
  ``["rhetoric_content"]`` carry;
- under ``"scores"``: every label's probability at each level (the labels the
  component was trained on, and ``literal``), accepted or not; an accepted
  label has the same value in both places. A label can be accepted below its
  threshold (the hierarchy's fallback to the most probable child, the
  parallelism linker rule), so compare with ``"scores"`` to see by how much.

Probabilities are floats in [0, 1]. The rule baseline
``rhetoric_simile_rules`` writes the three levels only, without ``"scores"``.
"""
from __future__ import annotations

from spacy.tokens import Span

#: The sentence attribute (``Span._.rhetoric``).
RHETORIC = "rhetoric"
#: The key of every label's probability in a ``Span._.rhetoric`` value.
SCORES = "scores"

if not Span.has_extension(RHETORIC):
    Span.set_extension(RHETORIC, default=None)
