# The two commands of the README: `make demo` and `make test`. Everything else is what they need.
# The interpreter the venv is made with: the distribution's when it can (scripts/pick-python.sh),
# chosen once per `make`
ifndef PYTHON
PYTHON := $(shell scripts/pick-python.sh)
endif
VENV := .venv
BIN := $(VENV)/bin
LAKE ?= work/lake

.PHONY: demo test venv airflow system-deps java js-deps spark-classes lint static check clean FORCE \
	fuzz-build fuzz fuzz-ci fuzz-ci-sanitizer

# A venv made with another interpreter than $(PYTHON) is made again, from scratch.
VENV_PYTHON := build/venv-python
$(VENV_PYTHON): FORCE
	@mkdir -p build && echo '$(PYTHON)' | cmp -s - $@ || echo '$(PYTHON)' > $@

$(BIN)/stomp-lake: pyproject.toml constraints.txt $(VENV_PYTHON)
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install -q --upgrade pip
	STOMP_LAKE_SKIP_EXTENSIONS=1 $(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

# The compiled hot paths (setup.py: the decoder's C; the Cython of the capture scanner, the flow
# pass's loop, the Arrow columns and the frames' rows, and of the modules compiled from their
# own source, `pipeline.compiled.SOURCE_MODULES`), built in place once after the
# editable install (which skips them); with no compiler the pure-Python twins run instead. After
# an edit, only what changed is compiled again.
COMPILED := build/compiled.stamp
COMPILED_FROM := setup.py pipeline/stomp/_speedups.c $(wildcard pipeline/*/_*.pyx pipeline/*.pxd pipeline/*/*.pxd) \
	$(shell sed -n 's/^    "\(pipeline\.[a-z_.]*\)",$$/\1/p' pipeline/compiled.py | tr . / | sed 's/$$/.py/')
$(COMPILED): $(BIN)/stomp-lake $(COMPILED_FROM)
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

# The package's own modules compiled to bytecode, as installing a wheel does: an editable install
# leaves it to each first import, and under PYTHONDONTWRITEBYTECODE (as in many containers) to
# every import of every run (the driver and the worker daemon compiled source at each start).
# Incremental: a module is compiled again only when its source is newer.
venv: $(BIN)/stomp-lake $(COMPILED)
	$(BIN)/python -m compileall -q pipeline schemas capture

# Airflow's own venv .venv-airflow from requirements-airflow.txt (instant when up to date)
airflow:
	@bash scripts/airflow-venv.sh >/dev/null

java:
	@bash scripts/install-system-deps.sh java

# @stomp/stompjs and ws (scripts/wsnode, versions locked) for the WebSocket clients of the tests
# and scripts/make_websocket_captures.py, from the npm registry into work/wsnode
WSNODE := work/wsnode
js-deps: $(WSNODE)/node_modules/.package-lock.json

$(WSNODE)/node_modules/.package-lock.json: scripts/wsnode/package.json scripts/wsnode/package-lock.json
	mkdir -p $(WSNODE)
	cp scripts/wsnode/package.json scripts/wsnode/package-lock.json $(WSNODE)/
	npm ci --prefix $(WSNODE) --no-audit --no-fund --loglevel=error

system-deps:
	@bash scripts/install-system-deps.sh all

# Spark's classes archived once per install (JDK 17 AppCDS): every local JVM starts faster
# (`stomp-lake warm`, pipeline/warm.py). Instant when this install's archive exists.
spark-classes: java venv
	$(BIN)/stomp-lake warm

demo: java venv spark-classes
	$(BIN)/stomp-lake demo --lake $(LAKE)

# Two workers (pytest-xdist), each test file whole on one of them: much of the suite waits on
# JVMs, brokers and subprocesses, so the second core is rarely idle. The Airflow venv is made
# first, once, for both.
TEST_WORKERS ?= 2
test: system-deps venv airflow js-deps spark-classes
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: venv
	$(BIN)/ruff check .

# Lint and types ([tool.mypy] in pyproject.toml): a minute, no test
static: $(BIN)/stomp-lake  # the venv's tools, not the compiled code: beside the compiling
	$(BIN)/ruff check .
	$(BIN)/python -m mypy

# Before a commit: lint, types and the tests needing no Spark, broker or long run
check: static
	$(BIN)/python -m pytest -m "not spark and not broker and not slow"

# Coverage-guided fuzzing (fuzz/README.md). fuzz-build: the compiled modules again with clang,
# ASan, UBSan and libFuzzer's coverage, in build/fuzz/src (the normal build is untouched), and
# atheris (pyproject's fuzz extra). fuzz: one session of TARGET for SECONDS from its kept
# corpus, which it then minimizes with what was found. fuzz-ci: every target briefly from its
# corpus on the normal build, two at a time, nothing kept. fuzz-ci-sanitizer: the sanitizer
# build from scratch, and the targets of its compiled code that run fastest under it (the
# decoder's C, the TLS record layer and bulk opener) through their kept corpora on it: that
# the build, its runtime and libFuzzer work on this machine (the rest at depth would take
# longer than CI allows).
FUZZ_TARGETS := decoder capture_reader reassembly flow websocket tls masker
SECONDS ?= 600
FUZZ_CI_SECONDS ?= 6
FUZZ_CI_JOBS ?= 2  # targets at once
FUZZ_SANITIZER_CI_TARGETS := decoder tls
ATHERIS := $(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/pip install -q atheris==3.0.0

fuzz-build: venv
	@bash scripts/install-system-deps.sh fuzz
	@$(ATHERIS)
	fuzz/build.sh

fuzz: fuzz-build
	@test -n "$(TARGET)" || { echo "usage: make fuzz TARGET=decoder SECONDS=600" >&2; exit 2; }
	fuzz/run.sh $(TARGET) $(SECONDS)

fuzz-ci: venv
	@$(ATHERIS)
	@printf '%s\n' $(FUZZ_TARGETS) | \
		xargs -P $(FUZZ_CI_JOBS) -I{} env PLAIN=1 KEEP=0 fuzz/run.sh {} $(FUZZ_CI_SECONDS)

fuzz-ci-sanitizer: fuzz-build
	@printf '%s\n' $(FUZZ_SANITIZER_CI_TARGETS) | \
		xargs -P $(FUZZ_CI_JOBS) -I{} env KEEP=0 fuzz/run.sh {} $(FUZZ_CI_SECONDS)

clean:
	rm -rf work .pytest_cache
