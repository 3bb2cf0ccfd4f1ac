"""Bad input at import: an unsupported Python refuses to import with a clear message."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

FAKE_VERSION = """
import sys
class FakeVersion(tuple):
    major, minor = 3, 10
sys.version_info = FakeVersion((3, 10, 0, "final", 0))
import fastdynamo
"""


def test_unsupported_python_refuses_to_import():
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    result = subprocess.run([sys.executable, "-c", FAKE_VERSION], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError: fastdynamo supports CPython 3.11; this is 3.10" in result.stderr


def test_native_version_matches_package(native):
    import fastdynamo

    assert native.runtime_version() == fastdynamo.__version__
