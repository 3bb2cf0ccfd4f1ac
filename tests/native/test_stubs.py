"""The hand-written stub ``python/fastdynamo/_native.pyi`` matches the built extension.

Runs ``mypy.stubtest`` (mypy is in the ``test`` extras) against the imported
``fastdynamo._native``: every runtime name has a stub, every stub name exists at runtime,
and parameter names, kinds and defaults agree. Return types are not checked by stubtest;
keep them in step with ``rust/`` by hand.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_native_stub_matches_extension(tmp_path: Path, subprocess_env) -> None:
    # torch is only used for annotations in the stub; not analysing it keeps this ~5 s
    # instead of ~35 s. The mypy cache goes to tmp_path, not into the repository.
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\ncache_dir = {tmp_path / 'mypy_cache'}\n\n"
        "[mypy-torch.*]\nfollow_imports = skip\n"
    )
    # Check the package the tests import (in place, or installed with its stub).
    env = subprocess_env()
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "fastdynamo._native",
         "--mypy-config-file", str(config)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, (
        "mypy.stubtest found differences between python/fastdynamo/_native.pyi and the "
        f"extension (is mypy installed? it is in the test extras):\n{result.stdout}\n{result.stderr}"
    )
