"""Fixtures for the verification tests."""

from __future__ import annotations

import pytest
from verify_helpers import CORPUS, TinyRetriever


@pytest.fixture
def tiny() -> TinyRetriever:
    r = TinyRetriever("tiny")
    r.index(CORPUS)
    return r
