"""Evaluation of generated rhetoric: reference metrics (BLEU, ROUGE-L,
perplexity, BERTScore), HAUSER metrics with a simile KB from our corpora,
LLM judges (CERD rating/ranking, five-dimension metaphor judge) and
agreement statistics for meta-evaluation.

Submodules are imported lazily by their users so that ``import
spacy_rhetoric`` stays light; :mod:`.hauser` registers
``spacy_rhetoric.HauserReranker.v1`` in ``registry.misc`` when imported.
"""
