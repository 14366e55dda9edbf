"""spacy-rhetoric: find, explain and generate rhetorical devices in Chinese prose.

Importing the package registers its factories, architectures and scorers
with spaCy (they are also reachable through the entry points in setup.cfg).
"""
from .spangroups import parallelisms, set_parallelisms
from .scorers import clauses as _clause_scorers  # noqa: F401
from .components import clause_segmenter as _clause_segmenter  # noqa: F401
from .components import parallelism_linker as _parallelism_linker  # noqa: F401
from .components import rhetoric_textcat as _rhetoric_textcat  # noqa: F401
from .components import rhetoric_components as _rhetoric_components  # noqa: F401
from .components import simile_rules as _simile_rules  # noqa: F401
from . import readers as _readers  # noqa: F401
from . import architectures as _architectures  # noqa: F401
from .ml import paragraphs as _paragraphs  # noqa: F401
from spacy_rhetoric.llm import openai_compatible  # noqa: F401  registers spacy_rhetoric.OpenAICompatible.v1
from spacy_rhetoric.llm import transformers_backend as _transformers_backend  # noqa: F401
from .components import rhetoric_generator as _rhetoric_generator  # noqa: F401
from .evaluation import hauser as _hauser  # noqa: F401  registers spacy_rhetoric.HauserReranker.v1

__all__ = ["parallelisms", "set_parallelisms"]
__version__ = "0.1.0"
