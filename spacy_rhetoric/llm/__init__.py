"""LLM backends, prompts and fine-tuning for rhetorical generation and judging."""
