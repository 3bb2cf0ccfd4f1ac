# Developer front door. Users: see the README's two commands.
# Another supported interpreter: `make build-dev PYTHON=/path/to/python3.12`. Each version
# builds in its own target directory (`target` for python3, `target-312`, `target-313`);
# the extensions are named per version, so all of them can sit in python/fastdynamo.
PYTHON ?= python3
PYTHON_EXE := $(shell $(PYTHON) -c "import sys; print(sys.executable)")
EXT_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
TARGET_DIR := $(if $(filter python3,$(PYTHON)),target,target-$(shell $(PYTHON) -c "import sys; print('%d%d' % sys.version_info[:2])"))
# python3 builds as the README's `cargo test` does (same environment, no rebuilds between them).
CARGO_ENV := $(if $(filter python3,$(PYTHON)),,PYO3_PYTHON=$(PYTHON_EXE) CARGO_TARGET_DIR=$(TARGET_DIR))

.PHONY: build-dev test test-long lint lint-python bench

build-dev:  ## build the native extension in place (release) for PYTHONPATH=python runs
	$(CARGO_ENV) cargo build --release --features extension-module
	# copy then rename: a process that has the old library mapped keeps it (cp over it faults)
	cp $(TARGET_DIR)/release/libfastdynamo.so python/fastdynamo/_native$(EXT_SUFFIX).new
	mv python/fastdynamo/_native$(EXT_SUFFIX).new python/fastdynamo/_native$(EXT_SUFFIX)

test: build-dev
	PYTHONPATH=python $(PYTHON) -m pytest -q
	$(CARGO_ENV) cargo test --quiet

test-long: build-dev
	PYTHONPATH=python $(PYTHON) -m pytest -q --hypothesis-profile=long

lint-python:  ## ruff, mypy and the import-layer contracts (configured in pyproject.toml)
	ruff check python/fastdynamo benches
	mypy python/fastdynamo
	PYTHONPATH=python lint-imports

lint: lint-python
	cargo clippy --all-targets -- -D warnings
	cargo fmt --check

bench: build-dev
	$(CARGO_ENV) cargo bench --bench runtime
	PYTHONPATH=python $(PYTHON) benches/compare.py
	PYTHONPATH=python $(PYTHON) benches/kernel_math.py
