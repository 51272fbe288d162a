# The two commands of the README: `make demo` and `make test`. Everything else is what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAKE ?= work/lake

.PHONY: demo test venv system-deps java lint bench clean

$(BIN)/stomp-lake: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

venv: $(BIN)/stomp-lake

java:
	@bash scripts/install-system-deps.sh java

system-deps:
	@bash scripts/install-system-deps.sh all

demo: java venv
	$(BIN)/stomp-lake demo --lake $(LAKE)

test: system-deps venv
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf work .pytest_cache
