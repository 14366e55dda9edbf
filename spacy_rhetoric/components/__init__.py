"""spaCy pipeline components (one module per factory)."""
