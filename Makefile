# Two commands matter: `make demo` and `make test`; both set up .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The TF wheel is an extra: cpu unless an NVIDIA driver is present.
TF_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)
STAMP := $(VENV)/.installed-$(TF_EXTRA)

.PHONY: demo test lint bench clean chromium

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[$(TF_EXTRA),dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tfperf demo

# The HTML report's browser test opens it in Debian's chromium (never a downloaded one):
# installed here when missing and apt-get is usable as root; elsewhere that test is skipped
# and says why.
chromium:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium || \
	    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }; }; } || \
	  echo "chromium not installed: the report's browser test will be skipped"

# The layers contract and the type checker run first: an import that points up or a type
# error fails the suite in seconds. Four workers on two cores: the tests of real processes
# spend part of their time waiting on them (1,257 tests, idle, one after another: 562 s on
# three workers, 450 s on four, 433 s on six). The 30 slowest are listed at the end: what
# to trim when the suite nears its 8 minutes.
# Bytecode caches on even where the environment turns them off (PYTHONDONTWRITEBYTECODE):
# the suite's workers and its ~150 child processes would each compile tfperf and the tests
# again (about 5 s of CPU per worker's collection, a few tenths per child).
test: $(STAMP) chromium
	$(BIN)/lint-imports
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 4 --dist loadfile --durations=30

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info demo_out .mypy_cache
