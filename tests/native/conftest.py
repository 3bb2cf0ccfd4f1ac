"""Fixtures for tests that drive the native runtime with hand-made code objects."""
from __future__ import annotations

import pytest

from fastdynamo._runtime import native as _load_native


@pytest.fixture
def native():
    """The native module, with interception off and caches empty before and after."""
    module = _load_native()
    module.set_callback(None)
    module.reset()
    limit = module.get_recompile_limit()
    yield module
    module.set_callback(None)
    module.reset()
    module.set_recompile_limit(limit)
    assert module.installed_evaluator() == "default"
