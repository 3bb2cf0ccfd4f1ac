"""The import layers of docs/architecture.md hold (``lint-imports`` with the contracts in
pyproject.toml), and the check does catch imports that break them: a copy of the package
with forbidden imports added fails each named contract."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "fastdynamo"
# lint-imports as a module call, so the test does not depend on PATH.
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(python_dir: Path, config: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(python_dir), "PATH": "", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache", str(config)],
                          cwd=python_dir, env=env, capture_output=True, text=True, timeout=60)


def test_the_package_keeps_its_layers():
    result = lint_imports(ROOT / "python", ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_every_module_of_the_package_has_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["id"] == "layers")["layers"]
    layered = {name.strip() for layer in layers for name in layer.split("|")}
    top_level = {f"fastdynamo.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    top_level |= {f"fastdynamo.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")}
    assert top_level - layered == set()


# (module, import added to it, the contract it breaks)
VIOLATIONS = [
    ("transform/codegen.py", "import fastdynamo.capture", "Layers"),  # siblings, not above
    ("bytecode/printer.py", "from fastdynamo import convert_frame", "Layers"),  # reaching up
    ("plans.py", "from fastdynamo.exc import unsupported", "Plans is a leaf"),
    ("backends/eager.py", "from fastdynamo.transform import codegen", "Backends see only an FX graph"),
]


def test_forbidden_imports_break_their_contracts(tmp_path):
    # one copy with every violation (one lint-imports run); the report names each import
    copy = tmp_path / "python" / "fastdynamo"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for module, statement, _ in VIOLATIONS:
        target = copy / module
        target.write_text(target.read_text() + f"\n{statement}  # added by the test\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = lint_imports(tmp_path / "python", tmp_path / "pyproject.toml")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for module, _, contract in VIOLATIONS:
        assert any(line.startswith(contract) and " BROKEN" in line for line in lines), result.stdout
        importer = "fastdynamo." + module.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> " in result.stdout, result.stdout
    assert "0 kept, 3 broken" in result.stdout
