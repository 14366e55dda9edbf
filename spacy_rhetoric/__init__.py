"""spacy-rhetoric: find, explain and generate rhetorical devices in Chinese prose.

Importing the package registers nothing by itself: spaCy finds the
factories, architectures, layers, scorers, readers, span getters, LLM
backends and rerankers through the entry points in ``setup.cfg`` and imports
each module only when a config or ``spacy.load`` needs it (as
spacy-experimental does).
"""
from .spangroups import parallelisms, set_parallelisms

__all__ = ["parallelisms", "set_parallelisms"]
__version__ = "0.5.0"
