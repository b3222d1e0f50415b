# Two commands for a fresh machine: `make demo` and `make test`; `make docs` builds the documentation site.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# setuptools says an editable install may be shadowed by same-named folders: ours map on purpose (package-dir)
PIP    := PYTHONWARNINGS="ignore:Editable installation:UserWarning" $(PY) -m pip

.PHONY: demo test test-clients bench clean array-api docs

$(VENV)/.installed-base: pyproject.toml setup.py lazytensor/core/_nodes.c lazytensor/core/_address.c kernels/cpu/_ufunc_loops.c lazytensor/assign/_direct_path.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py lazytensor/core/_nodes.c lazytensor/core/_address.c kernels/cpu/_ufunc_loops.c lazytensor/assign/_direct_path.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $(VENV)/.installed-base $@

$(VENV)/.installed-docs: pyproject.toml setup.py lazytensor/core/_nodes.c lazytensor/core/_address.c kernels/cpu/_ufunc_loops.c lazytensor/assign/_direct_path.c
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[docs]'
	touch $(VENV)/.installed-base $@

demo: $(VENV)/.installed-base
	$(PY) -m lazytensor demo

# The value tests run twice: on the compiled kernels (the suite waits for them: tests/conftest.py),
# then on the interpreter tier (LAZYTENSOR_TIER=interpreter: nothing compiles).
TIER_TESTS := tests/core tests/ops tests/assign tests/autodiff tests/cbr tests/nn tests/train tests/reuse \
              tests/plan tests/step tests/testing

test: $(VENV)/.installed-clients
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -m "not slow"    # long hunts: pytest -m slow
	LAZYTENSOR_TIER=interpreter $(PY) -m pytest -q -m "not slow and not compiled_tier" $(TIER_TESTS)

# Libraries that use the Array API on lazytensor arrays (tests/clients, part of `make test` too)
$(VENV)/.installed-clients: $(VENV)/.installed-test
	$(PIP) install -q -e '.[test,clients]'
	touch $@

test-clients: $(VENV)/.installed-clients
	$(PY) -m pytest -q tests/clients

bench: $(VENV)/.installed-test
	$(PY) -m lazytensor bench

# The documentation site (docs/, mkdocs.yml) into site/, warnings as errors
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# The Array API conformance suite against lazytensor.array_api (minutes; docs/benchmarks.md, "Array API conformance")
array-api: $(VENV)/.installed-test
	PY=$(abspath $(PY)) tests/array_api/run.sh $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .array-api-tests site
