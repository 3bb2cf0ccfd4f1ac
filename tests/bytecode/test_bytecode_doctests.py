"""The examples in the docstrings of the bytecode layer and codegen run."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "fastdynamo.bytecode", "fastdynamo.bytecode.analysis", "fastdynamo.bytecode.assemble",
    "fastdynamo.bytecode.decode", "fastdynamo.bytecode.edit",
    "fastdynamo.bytecode.exception_table", "fastdynamo.bytecode.instruction",
    "fastdynamo.bytecode.line_table", "fastdynamo.bytecode.printer",
    "fastdynamo.bytecode.version", "fastdynamo.bytecode.parameters", "fastdynamo.transform.codegen",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
    assert result.attempted > 0
