"""The whole training step as one CUDA graph, with stand-in graphs on the CPU (as tests/reuse/test_replay.py
does): the first call runs the steps, the second captures them, later calls launch one graph; the
graph memory budget does not refuse a training step; the results equal the steps run one by one."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.reuse import replay

from tests.nn.test_train_step import batches, conv_net
from tests.support.stand_in_graphs import stand_in_graphs


@pytest.fixture
def cpu_graphs(monkeypatch):
    captured = stand_in_graphs(monkeypatch)
    monkeypatch.setattr(replay, "BUDGET", 0)          # no room for graphs' temporaries: the arena is not theirs
    yield captured
    lt.release_graphs()


def _train(data):
    model = conv_net()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    launches = []
    for x, y in data:
        with lt.profile() as p:
            loss = step(x, y)
        launches.append([r.kind for r in p.kernels])
    return step, model, launches, loss


def test_the_step_is_one_graph_launch_from_the_third_call(cpu_graphs, monkeypatch):
    data = batches(5)
    step, model, launches, _ = _train(data)
    [graph] = cpu_graphs
    assert graph.launches == 4                           # call 2 captures and launches it; calls 3, 4, 5 launch it
    for kinds in launches[1:]:
        assert kinds.count("graph") == 1
    assert "graph" not in launches[0]
    text = lt.explain(step, source=False)
    assert "the whole step is ONE graph of" in text and "3 launches since" in text
    monkeypatch.setattr(replay, "ENABLED", False)     # the same step, run step by step
    reference = conv_net()
    ref_step = lt.train_step(reference, lt.cross_entropy, lt.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9))
    for x, y in data:
        ref_step(x, y)
    assert "LAZYTENSOR_CUDA_GRAPHS=0" in lt.explain(ref_step, source=False)
    for a, b in zip(model.parameters(), reference.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_released_graph_is_captured_again(cpu_graphs):
    data = batches(5)
    model = conv_net()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05))
    for x, y in data[:3]:
        step(x, y)
    lt.release_graphs()                      # as lazytensor does when the device runs out of memory
    step(*data[3])
    assert len(cpu_graphs) == 2 and cpu_graphs[1].launches == 1
    step(*data[4])
    assert cpu_graphs[1].launches == 2 and cpu_graphs[0].launches == 2
