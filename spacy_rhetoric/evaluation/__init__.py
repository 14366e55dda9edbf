"""The evaluation users rerun: the raw path (raw text in, the analysis
record scored by character offsets; :mod:`.raw_path`), the parallelism
linker's report (:mod:`.parallelism`, :mod:`.linker_raw`), ConFiguRe's tasks
(:mod:`.configure`), verified suggestions (:mod:`.suggestions`) and speed
(:mod:`.benchmark`); :mod:`.util` holds what the studies share with them.

Submodules are imported lazily by their users so that ``import
spacy_rhetoric`` stays light. Studies, the gold-unit figures among them,
live in :mod:`spacy_rhetoric.research`.
"""
