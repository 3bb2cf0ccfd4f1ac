"""The docstring examples of the capture modules run."""
import doctest
import importlib

import pytest

MODULES = [
    "fastdynamo.symbolic", "fastdynamo.symbolic.binding", "fastdynamo.symbolic.builder",
    "fastdynamo.symbolic.exc", "fastdynamo.symbolic.operators", "fastdynamo.symbolic.translator",
    "fastdynamo.symbolic.side_effects",
    "fastdynamo.symbolic.variables.base", "fastdynamo.symbolic.variables.builtins",
    "fastdynamo.symbolic.variables.constant", "fastdynamo.symbolic.variables.containers",
    "fastdynamo.symbolic.variables.tensor", "fastdynamo.symbolic.variables.nn_module",
    "fastdynamo.fx.output_graph", "fastdynamo.fx.passes", "fastdynamo.backends.eager",
    "fastdynamo.logs", "fastdynamo.config", "fastdynamo.api", "fastdynamo.explain",
    "fastdynamo.resume", "fastdynamo.fallback",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
