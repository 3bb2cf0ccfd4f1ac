"""Bad input at import: an unsupported Python refuses to import with a clear message."""
from __future__ import annotations

import subprocess
import sys

FAKE_VERSION = """
import sys
class FakeVersion(tuple):
    major, minor = 3, 10
sys.version_info = FakeVersion((3, 10, 0, "final", 0))
import fastdynamo
"""


def test_unsupported_python_refuses_to_import(subprocess_env):
    result = subprocess.run([sys.executable, "-c", FAKE_VERSION], env=subprocess_env(), capture_output=True,
                            text=True)
    assert result.returncode != 0
    assert "ImportError: fastdynamo supports CPython 3.11; this is 3.10" in result.stderr


def test_native_version_matches_package(native):
    import fastdynamo

    assert native.runtime_version() == fastdynamo.__version__


def test_child_processes_import_the_package_under_test(subprocess_env):
    # Subprocess tests run the fastdynamo this process imported (in place or installed),
    # with the extension this process loaded.
    import fastdynamo

    script = "import fastdynamo, fastdynamo._native as n; print(fastdynamo.__file__); print(n.__file__)"
    result = subprocess.run([sys.executable, "-c", script], env=subprocess_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [fastdynamo.__file__, fastdynamo._native.__file__]
