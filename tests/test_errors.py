"""The error catalogue: every code is defined once (a second ``R019 = ...``
in the class body silently replaces the first, and the message of another
error goes with it)."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import spacy_rhetoric.errors as errors


def test_every_error_code_is_defined_once():
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf8"))
    catalogue = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Errors")
    codes = [t.id for n in catalogue.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    assert codes, "no error codes found"
    assert [c for c, k in Counter(codes).items() if k > 1] == []
