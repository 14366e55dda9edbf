"""Model layers and architectures (thinc, torch). Importing the package
registers the fork handler of :mod:`spacy_rhetoric.runtime.threads`, which
the torch layers need in forked workers."""
from ..runtime.threads import register_fork_handler

register_fork_handler()
