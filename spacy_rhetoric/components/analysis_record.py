"""``rhetoric_analysis_record``: a doc's analysis record made where the doc
was analysed.

``rhetoric analyze --n-process N`` runs the pipeline in spaCy's forked
workers, and every doc comes back to the parent as ``Doc.to_bytes``: its
tokens, tensor, ten span groups and the sentences' ``._.rhetoric`` values,
packed by the worker and unpacked by the parent, which then builds the record
from them. On the 409 PSE-I essays that packing and unpacking took 1.8 s
each way beside 15 s of analysis, the unpacking on the parent's side of
2 cores. Added last to the pipeline, this component builds the record's
body (:func:`spacy_rhetoric.analysis.records.record_body`) in the worker, stores it
in ``doc.user_data``, and (``slim``) leaves the doc its tokens and
sentence boundaries only, so that little crosses between the processes;
:func:`spacy_rhetoric.analysis.records.doc_to_record` then uses the stored body.

Use it only where the records are all that is wanted of the docs: with
``slim`` a doc loses its span groups, tensor and every other
``user_data`` entry.
"""
from __future__ import annotations

import numpy
from spacy.language import Language
from spacy.tokens import Doc

from ..analysis.records import RECORD_BODY_KEY, record_body


@Language.factory("rhetoric_analysis_record", default_config={"slim": True})
def make_analysis_record(nlp: Language, name: str, slim: bool) -> "AnalysisRecord":
    """Factory of :class:`AnalysisRecord`."""
    return AnalysisRecord(name, slim=slim)


class AnalysisRecord:
    """Writes ``doc.user_data[RECORD_BODY_KEY]`` (the record body) and, with
    ``slim``, drops the doc's span groups, tensor and other ``user_data``."""

    def __init__(self, name: str = "rhetoric_analysis_record", *, slim: bool = True) -> None:
        self.name = name
        self.slim = slim

    def __call__(self, doc: Doc) -> Doc:
        body = record_body(doc)
        if self.slim:
            doc.spans.clear()
            doc.tensor = numpy.zeros((0, 0), dtype="float32")
            doc.user_data.clear()
        doc.user_data[RECORD_BODY_KEY] = body
        return doc
