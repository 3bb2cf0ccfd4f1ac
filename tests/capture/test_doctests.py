"""The docstring examples of the capture modules run."""
import doctest
import importlib

import pytest

MODULES = [
    "fastdynamo.capture", "fastdynamo.capture.binding", "fastdynamo.capture.builder",
    "fastdynamo.exc", "fastdynamo.capture.operators", "fastdynamo.capture.translator",
    "fastdynamo.capture.side_effects",
    "fastdynamo.capture.variables.base", "fastdynamo.capture.variables.builtins",
    "fastdynamo.capture.variables.constant", "fastdynamo.capture.variables.containers",
    "fastdynamo.capture.variables.tensor", "fastdynamo.capture.variables.nn_module",
    "fastdynamo.capture.output_graph", "fastdynamo.plans", "fastdynamo.fx.passes", "fastdynamo.backends.eager",
    "fastdynamo.logs", "fastdynamo.config", "fastdynamo.api", "fastdynamo.explain",
    "fastdynamo.transform.resume", "fastdynamo.transform.fallback",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
