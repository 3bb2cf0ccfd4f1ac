"""The docstring examples of the Triton backend's modules run (in interpreter mode)."""
import doctest
import importlib
import os

import pytest

MODULES = [
    "fastdynamo.backends", "fastdynamo.backends.triton", "fastdynamo.backends.triton.aten_rules",
    "fastdynamo.backends.triton.cache", "fastdynamo.backends.triton.compiler",
    "fastdynamo.backends.triton.decompositions", "fastdynamo.backends.triton.fusion",
    "fastdynamo.backends.triton.indexing", "fastdynamo.backends.triton.ir",
    "fastdynamo.backends.triton.lowering", "fastdynamo.backends.triton.ops",
    "fastdynamo.backends.triton.render", "fastdynamo.backends.triton.runtime",
    "fastdynamo.backends.triton.templates", "fastdynamo.backends.triton.views",
    "fastdynamo.backends.triton.wrapper",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    # the cache module's example points FASTDYNAMO_CACHE_DIR at a new directory
    monkeypatch.setenv("FASTDYNAMO_CACHE_DIR", os.environ["FASTDYNAMO_CACHE_DIR"])
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
