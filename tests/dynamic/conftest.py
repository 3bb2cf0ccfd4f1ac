"""Each test starts without compiled entries or recorded sizes (entries live on code
objects, which several tests share)."""
from __future__ import annotations

import pytest

import fastdynamo


@pytest.fixture(autouse=True)
def _fresh_compiler():
    fastdynamo.reset()
    yield
    fastdynamo.reset()
