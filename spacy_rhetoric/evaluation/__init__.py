"""The evaluation users rerun: the raw path (raw text in, the analysis
record scored by character offsets; :mod:`.raw_path`), the parallelism
linker's report (:mod:`.parallelism`, :mod:`.linker_raw`), ConFiguRe's tasks
(:mod:`.configure`), the classifiers on DocBins and their thresholds
(:mod:`.rhetoric`), verified suggestions (:mod:`.suggestions`) and speed
(:mod:`.benchmark`).

Submodules are imported lazily by their users so that ``import
spacy_rhetoric`` stays light. Studies live in :mod:`spacy_rhetoric.research`.
"""
