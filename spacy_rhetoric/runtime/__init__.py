"""Process-level settings a pipeline needs at run time: torch and BLAS
threads and the fork handler (:mod:`.threads`), numpy BLAS matrix products
on one thread (:mod:`.cpu_ops`), the msgpack codec look-up done once
(:mod:`.msgpack_codecs`). The last two are registered callbacks a config
names in ``[nlp.after_pipeline_creation]``.
"""
