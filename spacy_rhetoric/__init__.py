from spacy_rhetoric.llm import openai_compatible  # noqa: F401  registers spacy_rhetoric.OpenAICompatible.v1
