"""Rich display (lazytensor.tools.display): what expressions, tensors and lt.explain show in a
notebook, and that showing them runs nothing; Profile and Table as pandas DataFrames."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.bench.table import Table


def _operands():
    a = lt.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")
    b = lt.asarray(np.linspace(-1, 1, 4, dtype=np.float32), device="cpu")
    return a, b


def test_an_expression_shows_its_tree_shape_dtype_device_and_plan_without_running():
    a, b = _operands()
    e = lt.relu((a + b) * 2)
    with lt.profile() as p:
        page = e._repr_html_()
    assert p.launches == 0
    assert e.last_plan is None                       # planned for the display, never assigned
    for text in ("relu((t0 + t1) * 2.0)", "(3, 4)", "float32", "cpu", "not evaluated",
                 "[1] relu -&gt; float32 (3, 4)", "t1: tensor float32 (4,) on cpu",
                 "plan: 1 step", "FusedElementwise on cpu", "v5: float32 = relu(v4)"):
        assert text in page, text


def test_a_reduction_shows_its_steps_without_running():
    a, b = _operands()
    e = lt.sum(lt.exp(a), axis=0) + b
    with lt.profile() as p:
        page = e._repr_html_()
        again = e._repr_html_()
    # the first display plans, as an assignment would, and keeps the plan: the second finds it kept
    assert p.launches == 0 and page.replace("cache: miss", "cache: hit").split("cache: hit")[0] == again.split("cache: hit")[0]
    assert "plan: 2 steps" in page and "FusedReduction on cpu" in page and "FusedElementwise on cpu" in page


def test_a_shared_node_is_shown_once():
    a, _ = _operands()
    s = a * 3
    page = (s + s)._repr_html_()
    assert "(node 2, again)" in page


def test_a_tensor_shows_its_values_as_numpy_does_with_its_device():
    a, _ = _operands()
    page = a._repr_html_()
    assert np.array2string(a.numpy(), separator=", ").splitlines()[0] in page
    assert "device=&#x27;cpu&#x27;" in page and "dtype=float32" in page


def test_explain_prints_as_text_and_shows_a_table_and_highlighted_source():
    a, b = _operands()
    e = lt.relu((a + b) * 2)
    with lt.profile() as p:
        x = lt.explain(e)
        page = x._repr_html_()
    assert p.launches == 0
    assert isinstance(x, str) and str(x).startswith("expression: relu((t0 + t1) * 2.0)")
    assert [type(s).__name__ for s in x.steps] == ["FusedElementwise"]
    assert "<th>step</th>" in page and "<td>FusedElementwise on cpu</td>" in page
    assert "cpu kernel lt_" in page and "kernel_seq" in page
    assert 'style="color' in page                   # pygments' inline styles


def test_explain_shows_plain_source_without_pygments(monkeypatch):
    a, b = _operands()
    monkeypatch.setitem(sys.modules, "pygments", None)
    page = lt.explain(a - b)._repr_html_()
    assert "<pre>" in page and "def kernel_seq(" in page and 'style="color' not in page


def test_explain_without_source_shows_the_programs():
    a, b = _operands()
    page = lt.explain(a * b, source=False)._repr_html_()
    assert "v2: float32 = multiply(v0, v1)" in page and "kernel_seq" not in page


def test_explain_in_ipythons_terminal_is_the_text():
    a, b = _operands()
    x = lt.explain(a + b, source=False)
    IPython = pytest.importorskip("IPython.lib.pretty")
    assert IPython.pretty(x) == str(x)


def test_profile_as_a_dataframe():
    pd = pytest.importorskip("pandas")
    a, b = _operands()
    y = lt.empty_like(a)
    with lt.profile() as p:
        y[...] = a * b + 1
    df = p.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["kernel", "backend", "kind", "elements", "cache", "compile_seconds"]
    assert len(df) == 1 and df.loc[0, "elements"] == 12 and df.loc[0, "backend"] == "cpu"


def test_benchmark_table_as_a_dataframe():
    pytest.importorskip("pandas")
    t = Table("t", "NumPy")
    t.add("c", "NumPy", 2.0)
    t.add("c", "lazytensor", 0.5)
    t.add("d", "lazytensor", 1.0)
    t.floor("c", 0.25, "bytes / bandwidth")
    df = t.to_pandas()
    assert list(df.columns) == ["case", "implementation", "seconds", "x_floor", "speedup"]
    assert df["x_floor"].tolist()[:2] == [8.0, 2.0] and np.isnan(df["x_floor"].iloc[2])
    assert df["speedup"].tolist()[:2] == [1.0, 4.0] and np.isnan(df["speedup"].iloc[2])


def test_to_pandas_without_pandas_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with lt.profile() as p:
        pass
    with pytest.raises(ImportError, match=r"pip install 'lazytensor\[notebooks\]'"):
        p.to_pandas()
    with pytest.raises(ImportError, match=r"pip install 'lazytensor\[notebooks\]'"):
        Table("t", "NumPy").to_pandas()
