"""Corpus converters, one module per corpus format."""
