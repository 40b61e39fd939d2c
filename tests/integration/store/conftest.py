"""The store under test: the one for the database in use."""

from __future__ import annotations

import pytest

from jobs.store import Store, for_database


@pytest.fixture
def store() -> Store:
    return for_database()
