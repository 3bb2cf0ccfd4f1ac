# Developer front door. Users: see the README's two commands.
EXT_SUFFIX := $(shell python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")

.PHONY: build-dev test test-long lint lint-python bench

build-dev:  ## build the native extension in place (release) for PYTHONPATH=python runs
	cargo build --release --features extension-module
	cp target/release/libfastdynamo.so python/fastdynamo/_native$(EXT_SUFFIX)

test: build-dev
	PYTHONPATH=python python3 -m pytest -q
	cargo test --quiet

test-long: build-dev
	PYTHONPATH=python python3 -m pytest -q --hypothesis-profile=long

lint-python:  ## ruff, mypy and the import-layer contracts (configured in pyproject.toml)
	ruff check python/fastdynamo benches
	mypy python/fastdynamo
	PYTHONPATH=python lint-imports

lint: lint-python
	cargo clippy --all-targets -- -D warnings
	cargo fmt --check

bench: build-dev
	cargo bench --bench runtime
	PYTHONPATH=python python3 benches/compare.py
