"""The generator side: LLM backends, prompts, the generation task, the
verifier and what it needs at generation time (object matching,
:mod:`.rhetoric_success`; KenLM fluency, :mod:`.ngram_lm`; the HAUSER
reranker and its simile KB, :mod:`.hauser`, :mod:`.kb`), and fine-tuning."""
