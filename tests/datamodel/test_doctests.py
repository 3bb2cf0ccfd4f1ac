"""The docstring examples of the data-model modules run (and find examples)."""
import doctest
import importlib

import pytest

MODULES = [
    "fastdynamo.capture.dunders", "fastdynamo.capture.variables.arity",
    "fastdynamo.capture.variables.dict_views", "fastdynamo.capture.variables.dict_order",
    "fastdynamo.capture.variables.iterators", "fastdynamo.capture.variables.itertools_",
    "fastdynamo.capture.variables.collections_", "fastdynamo.capture.variables.sets",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
