# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench clean array-api

$(VENV)/.installed-base: pyproject.toml setup.py lazytensor/core/_nodes.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py lazytensor/core/_nodes.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(VENV)/.installed-base $@

demo: $(VENV)/.installed-base
	$(PY) -m lazytensor demo

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -m "not slow"    # long hunts: pytest -m slow

bench: $(VENV)/.installed-test
	$(PY) -m lazytensor bench

# The Array API conformance suite against lazytensor.array_api (minutes; README, "The Array API namespace")
array-api: $(VENV)/.installed-test
	PY=$(abspath $(PY)) tests/array_api/run.sh $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .array-api-tests
