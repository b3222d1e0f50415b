"""Experience tables: naming, round trip through JSON, lookup order, merging per (GPU, cuDNN)."""

import json

import pytest

from lazytensor.cbr.conv_key import ConvKey
from lazytensor.cbr.cudnn_graphs import GraphKind
from lazytensor.cbr.cudnn_plans import PlanTiming
from lazytensor.cbr.experience_table import ExperienceTable, device_slug, make_entry, rejected_entry

KEY = ConvKey.of((128, 56, 56, 64), (64, 3, 3, 64), "float16", 1, 1, 1)


def timings():
    return [
        PlanTiming(0, "eng0_k2=1", 0.30, 0, [0.3]),
        PlanTiming(1, "eng1_k3=0", 0.10, 1 << 20, [0.1]),
        PlanTiming(2, "eng9", 60.0, 0, [60.0], gave_up=True),
        PlanTiming(3, "eng4_k5=2", 0.12, 4096, [0.12]),
    ]


def test_entry_ranks_by_median_time():
    entry = make_entry(44, timings(), {"eng7": "RuntimeError: no"})
    assert entry["plan_count"] == 44 and entry["timed"] == 4
    assert [entry[r]["name"] for r in ("winner", "backup1", "backup2")] == ["eng1_k3=0", "eng4_k5=2", "eng0_k2=1"]
    assert entry["workspace_bytes"] == 1 << 20
    assert entry["heuristic_choice"] == {"name": "eng0_k2=1", "index": 0, "median_ms": 0.3}
    assert entry["times_ms"]["eng9"] == 60.0
    assert entry["failed"] == {"eng7": "RuntimeError: no"}


def test_save_load_round_trip_and_lookup(tmp_path):
    table = ExperienceTable("NVIDIA H200", 91900, meta={"model": "resnet50"})
    table.record("conv_genstats", KEY, make_entry(10, timings(), {}))
    table.record("conv_scale_bias_relu", KEY, rejected_entry("no engine"))
    path = table.save(tmp_path / table.file_name("resnet50"))
    assert path.name == "nvidia-h200__cudnn91900__resnet50.json"
    assert json.loads(path.read_text())["format"] == 1

    loaded = ExperienceTable.load(path)
    assert loaded.plan_names("conv_genstats", KEY) == ["eng1_k3=0", "eng4_k5=2", "eng0_k2=1"]
    assert loaded.plan_names("conv_genstats", KEY.table_key()) == loaded.plan_names("conv_genstats", KEY)
    assert loaded.plan_names("conv", KEY) == []
    assert loaded.rejection("conv_scale_bias_relu", KEY) == "no engine"
    assert loaded.rejection("conv_genstats", KEY) is None
    assert loaded.meta == {"model": "resnet50"}


def test_for_device_merges_that_devices_files_only(tmp_path):
    other_key = ConvKey.of((64, 224, 224, 64), (64, 3, 3, 64), "float16", 1, 1, 1)
    a = ExperienceTable("NVIDIA H200", 91900)
    a.record("conv", KEY, make_entry(3, timings()[:1], {}))
    a.save(tmp_path / a.file_name("resnet50"))
    b = ExperienceTable("NVIDIA H200", 91900)
    b.record("conv", other_key, make_entry(3, timings()[1:2], {}))
    b.save(tmp_path / b.file_name("vgg16"))
    c = ExperienceTable("NVIDIA H200", 91000)  # another cuDNN: plan names need not mean the same
    c.record("conv", KEY, make_entry(3, timings()[3:], {}))
    c.save(tmp_path / c.file_name())

    merged = ExperienceTable.for_device("NVIDIA H200", 91900, tmp_path)
    assert len(merged) == 2
    assert merged.plan_names("conv", KEY) == ["eng0_k2=1"]
    assert merged.plan_names("conv", other_key) == ["eng1_k3=0"]
    assert len(ExperienceTable.for_device("NVIDIA H100 80GB HBM3", 91900, tmp_path)) == 0
    assert len(ExperienceTable.for_device("NVIDIA H200", 91900, tmp_path / "absent")) == 0


def test_device_slug():
    assert device_slug("NVIDIA H100 80GB HBM3", 90100) == "nvidia-h100-80gb-hbm3__cudnn90100"


def test_not_a_table(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="not a lazytensor experience table"):
        ExperienceTable.load(path)


def test_shipped_tables_load():
    from lazytensor.cbr.experience_table import TABLES_DIR

    for path in sorted(TABLES_DIR.glob("*.json")):
        table = ExperienceTable.load(path)
        for key, kinds in table.shapes.items():
            ConvKey.from_table_key(key)
            for kind, entry in kinds.items():
                assert kind in {k.value for k in GraphKind}
                assert "rejected" in entry or "error" in entry or "plan_count" in entry


class _BackwardGraph:
    """The part of a cuDNN graph plan choice uses (as tests/assign/test_faults.py's), of a backward kind."""

    def __init__(self, kind, key, names):
        self.kind, self.key, self.names, self.plan_count = kind, key, list(names), len(names)

    def plan_name(self, i):
        return self.names[i]

    def build_plan(self, i):
        return 0


BENCH_SHAPES = [((128, 56, 56, 64), (64, 3, 3, 64)), ((128, 14, 14, 256), (256, 3, 3, 256)),
                ((64, 224, 224, 64), (64, 3, 3, 64))]


@pytest.mark.parametrize("kind", [GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD])
@pytest.mark.parametrize("x_shape, w_shape", BENCH_SHAPES, ids=["resnet56", "resnet14", "vgg224"])
def test_the_h200_tables_give_the_backward_graphs_their_winners(kind, x_shape, w_shape, monkeypatch):
    # the benchmark's shapes: the shipped H200 tables list dgrad and wgrad, and plan choice takes the
    # winner without timing (explain then says "experience table winner")
    from lazytensor.cbr import cudnn_cache
    table = ExperienceTable.for_device("NVIDIA H200", 91900)
    key = ConvKey.of(x_shape, w_shape, "float16", 1, 1, 1)
    ranked = dict(table.ranked_plans(kind, key))
    assert ranked.get("winner"), f"no {kind.value} entry for {key.table_key()}"
    monkeypatch.setattr(cudnn_cache, "fastest_plan", lambda *a: pytest.fail("a shape the table lists was timed"))
    graph = _BackwardGraph(kind, key, ["eng_other", ranked["winner"], "eng_last"])
    choice = cudnn_cache.ConvGraphCache(tune=True, table=table)._choose_plan(graph, table, {})
    assert (choice.source, choice.rank, choice.name) == ("table", "winner", ranked["winner"])
    assert "experience table winner" in choice.describe()


@pytest.mark.parametrize("tune", [True, False])
def test_a_backward_shape_without_an_entry_is_timed_once_else_cudnns_heuristic(tune, monkeypatch):
    from lazytensor.cbr import cudnn_cache
    from lazytensor.cbr.cudnn_plans import PlanChoice
    table = ExperienceTable.for_device("NVIDIA H200", 91900)
    key = ConvKey.of((3, 9, 9, 24), (40, 3, 3, 24), "float16", 1, 1, 1)     # in no model's table
    assert not table.ranked_plans(GraphKind.CONV_WGRAD, key)
    timed = []

    def fastest(graph, pointers, candidates, runs):
        timed.append(graph.key)
        return PlanChoice(1, graph.plan_name(1), 0, "timed", graph.plan_count)

    monkeypatch.setattr(cudnn_cache, "fastest_plan", fastest)
    graph = _BackwardGraph(GraphKind.CONV_WGRAD, key, ["eng_a", "eng_b"])
    choice = cudnn_cache.ConvGraphCache(tune=tune, table=table)._choose_plan(graph, table, {})
    assert (choice.source, bool(timed)) == (("timed", True) if tune else ("heuristic", False))
