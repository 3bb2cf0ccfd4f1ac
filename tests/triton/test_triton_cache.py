"""The on-disk cache: a second process compiling the same graph writes nothing and
skips code generation."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import json, torch
    from fastdynamo.backends.kernels import cache
    from fastdynamo.backends.triton import compile_graph
    def fn(x, w):
        return torch.nn.functional.layer_norm(x, (8,), w) @ w.expand(8, 8), torch.softmax(x, 0)
    x, w = torch.randn(4, 8), torch.randn(8)
    compiled = compile_graph(torch.fx.symbolic_trace(fn), [x, w])
    out = compiled(x, w)
    ok = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out, fn(x, w)))
    print(json.dumps({"stats": dict(cache.STATS), "ok": ok, "path": compiled.source_path,
                      "kernels": compiled.kernel_count}))
""")


def _run(env: dict[str, str]) -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_second_process_writes_nothing_and_skips_codegen(tmp_path, subprocess_env):
    first = _run(subprocess_env(cache_dir=tmp_path))
    assert first["ok"] and first["stats"].get("codegen") == 1 and first["stats"].get("writes") == 1
    files = sorted((tmp_path / "modules").iterdir())
    assert [f.suffix for f in files] == [".py"]
    before = {f: (f.stat().st_mtime_ns, f.stat().st_size) for f in files}

    second = _run(subprocess_env(cache_dir=tmp_path))
    assert second["ok"] and second["path"] == first["path"] and second["kernels"] == first["kernels"]
    assert second["stats"].get("codegen", 0) == 0 and second["stats"].get("writes", 0) == 0
    assert second["stats"].get("disk_hits") == 1
    after = {f: (f.stat().st_mtime_ns, f.stat().st_size) for f in sorted((tmp_path / "modules").iterdir())}
    assert after == before


def test_key_changes_with_input_metadata(fresh_cache):
    import torch

    from fastdynamo.backends.kernels import cache
    from fastdynamo.backends.triton import compile_graph

    tmp_path = fresh_cache.disk()
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    paths = {compile_graph(gm, [t]).source_path for t in
             (torch.randn(4), torch.randn(5), torch.randn(4, dtype=torch.float16), torch.randn(8)[::2])}
    assert len(paths) == 4 and all(Path(p).parent == tmp_path / "modules" for p in paths)
    assert cache.module_path("abc").parent == tmp_path / "modules"
