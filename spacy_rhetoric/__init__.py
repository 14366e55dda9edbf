"""spacy-rhetoric: find, explain and generate rhetorical devices in Chinese prose.

Importing the package registers nothing by itself: spaCy finds the
factories, architectures, layers, scorers, readers, span getters, LLM
backends and rerankers through the entry points in ``setup.cfg`` and imports
each module only when a config or ``spacy.load`` needs it (as
spacy-experimental does).
"""
from .spangroups import parallelisms, set_parallelisms

__all__ = ["parallelisms", "set_parallelisms", "doc_to_record"]
__version__ = "0.6.0"


def __getattr__(name: str):
    # doc_to_record is imported on first use: the records module pulls in
    # the taxonomy and span helpers, which `import spacy_rhetoric` should not
    if name == "doc_to_record":
        from .analysis.records import doc_to_record

        return doc_to_record
    raise AttributeError(f"module 'spacy_rhetoric' has no attribute {name!r}")
