"""The Chinese tokenizer (``spacy_rhetoric.ChineseTokenizer.v1``): spaCy's
Chinese tokenizer with pkuseg, and the pkuseg speed-ups it uses (feature
extraction, merges, substring hashes). Modules are imported by their users
and by the ``spacy_tokenizers`` entry point, never here.
"""
