import pytest

import fastdynamo


@pytest.fixture(autouse=True)
def _fresh_cache():
    fastdynamo.reset()
    yield
    fastdynamo.reset()
