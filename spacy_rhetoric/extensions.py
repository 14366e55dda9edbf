"""The custom attributes spacy-rhetoric's components write, registered in
one place: ``Span._.rhetoric`` on sentences, ``{"coarse": {label: score},
"form": {...}, "content": {...}}`` (DESIGN §6). Importing this module
registers them once; the components that write them import it."""
from __future__ import annotations

from spacy.tokens import Span

#: The sentence attribute (``Span._.rhetoric``).
RHETORIC = "rhetoric"

if not Span.has_extension(RHETORIC):
    Span.set_extension(RHETORIC, default=None)
