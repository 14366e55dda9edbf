"""Shared fixtures: the real corpora beside the checkout (``../shared/data``)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RHETORIC_SHARED_DATA", ROOT.parent / "shared" / "data"))


def pytest_collection_modifyitems(items) -> None:
    """Mark ``corpus`` every test that needs the real corpora (through the
    ``shared_data`` fixture or one built on it): ``-m "not corpus"`` selects
    what runs in a clone without ``../shared/data``; ``make test`` and CI
    run both."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ``../shared/data``; tests that need real data skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def pse_dir(shared_data: Path) -> Path:
    return shared_data / "pse-i"


@pytest.fixture(scope="session")
def simile_dir(shared_data: Path) -> Path:
    return shared_data / "simile"


@pytest.fixture(scope="session")
def cmdag_dir(shared_data: Path) -> Path:
    return shared_data / "cmdag"


@pytest.fixture(scope="session")
def pse_docbins(pse_dir: Path, tmp_path_factory) -> Path:
    """PSE-I converted once per test session: ``{train,dev,optimization,test}.spacy``."""
    import spacy

    from spacy_rhetoric.corpora.pse_i import convert_pse_i

    out = tmp_path_factory.mktemp("pse-i")
    convert_pse_i(pse_dir, out, spacy.blank("zh").vocab)
    return out


@pytest.fixture(scope="session")
def simile_docbins(simile_dir: Path, tmp_path_factory) -> Path:
    """The simile corpus converted once per test session: ``{train,dev,test}.spacy``."""
    import spacy

    from spacy_rhetoric.corpora.simile import convert_simile

    out = tmp_path_factory.mktemp("simile")
    convert_simile(simile_dir, out, spacy.blank("zh").vocab)
    return out
