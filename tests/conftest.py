"""Shared fixtures: the real corpora beside the checkout (``../shared/data``)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RHETORIC_SHARED_DATA", ROOT.parent / "shared" / "data"))


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
