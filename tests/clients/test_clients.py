"""Libraries that support the Array API, run on lazytensor arrays, give NumPy's results (rtol 1e-7 in
float64): each row of tests/clients/cases.py, skipped where its library is not installed (the
`clients` extra, `make test-clients`). The table in docs/guide/clients.md is made from the same rows:
`LT_WRITE_CLIENTS_TABLE=1 make test-clients` writes it, and this test checks it is up to date."""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import numpy as np
import pytest

from lazytensor import array_api as xp
from tests.clients.cases import CASES

PAGE = Path(__file__).parents[2] / "docs" / "guide" / "clients.md"
BEGIN, END = "<!-- the table: tests/clients/test_clients.py -->", "<!-- end of the table -->"
MODULE = {"scikit-learn": "sklearn", "scipy": "scipy"}


def _inputs():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((20, 5)), rng.standard_normal((20, 5)) * 3 + 1
    B = rng.uniform(-1, 2, 20)
    return X, Y, B


def _values(out) -> list:
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.library}:{c.name}" for c in CASES])
def test_a_client_gives_numpys_values(case):
    pytest.importorskip(MODULE[case.library])
    if case.library == "scipy":
        from scipy._lib._array_api import SCIPY_ARRAY_API
        if not SCIPY_ARRAY_API:
            pytest.skip("SciPy was imported before SCIPY_ARRAY_API=1 was set (tests/conftest.py sets it)")
    arrays = _inputs()
    want = _values(case.run(*arrays))
    try:
        got = _values(case.run(*(xp.asarray(a) for a in arrays)))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-12)
    except Exception as e:
        if case.status == "pass":
            raise
        print(f"{case.name}: fails as its row says ({case.status}): {type(e).__name__}: {e}")
        return
    assert case.status == "pass", f"{case.name} passes now: make its row's status 'pass'"


def table() -> str:
    rows = ["| library | function or estimator | with lazytensor arrays |", "|---|---|---|"]
    for c in CASES:
        outcome = "NumPy's values" if c.status == "pass" else c.status
        rows.append(f"| {c.library} | `{c.name}` | {outcome} |")
    return "\n".join(rows)


def _versions() -> str:
    found = []
    for name in sorted(set(MODULE)):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def test_the_docs_table_shows_the_rows():
    text = PAGE.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    fresh = f"{head}{BEGIN}\n{table()}\n{END}{tail}"
    if os.environ.get("LT_WRITE_CLIENTS_TABLE") == "1" and text != fresh:
        PAGE.write_text(fresh)
        print(f"wrote {PAGE} ({_versions()})")
        return
    assert text == fresh, "docs/guide/clients.md is behind tests/clients/cases.py: run LT_WRITE_CLIENTS_TABLE=1 make test-clients"
