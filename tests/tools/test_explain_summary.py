"""lt.explain of a long plan reads in a screen: a training step's steps by kind with their counts,
each step with detail=True or "full"; a short expression's text is what it always was."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.plan.step_summary import SUMMARY_OVER, step_kind


def small_vgg_step():
    rng = np.random.default_rng(0)
    model = lt.nn.Sequential(
        lt.nn.Conv2d(3, 4, 3, padding=1, bias=False, rng=rng), lt.nn.BatchNorm2d(4), lt.nn.ReLU(),
        lt.nn.Conv2d(4, 6, 3, padding=1, bias=False, rng=rng), lt.nn.BatchNorm2d(6), lt.nn.ReLU(),
        lt.nn.MaxPool2d(2), lt.nn.Flatten(), lt.nn.Linear(4 * 4 * 6, 3, rng=rng))
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
    step(rng.standard_normal((2, 8, 8, 3)).astype(np.float32), rng.integers(0, 3, 2))
    return step


def test_a_training_step_prints_its_steps_by_kind_in_a_screen():
    step = small_vgg_step()
    steps = step.last.plan.steps
    assert len(steps) > SUMMARY_OVER
    text = str(lt.explain(step))
    lines = text.splitlines()
    assert len(lines) < 60
    assert "\n[1] " not in text
    assert f"steps by kind ({len(steps)} steps" in text
    kinds = {}
    for s in steps:
        kinds[step_kind(s)] = kinds.get(step_kind(s), 0) + 1
    for kind, n in kinds.items():
        assert f"  {kind}: {n}" in lines
    assert "memory of a call:" in text and "arena" in text
    assert "no CUDA graph" in text and "streams:" in text
    assert "  2 blocks: " in text or text.count("  1 block: ") == 2     # Conv-BN blocks that decided alike, once


def test_detail_gives_the_full_listing():
    step = small_vgg_step()
    steps = step.last.plan.steps
    full = lt.explain(step, detail=True, source=False)
    assert full.count("\n[") == len(steps)
    assert all(f"\n[{i}] " in full for i in range(1, len(steps) + 1))
    assert str(lt.explain(step, "full", source=False)) == str(full)
    assert "block 1: " in full and "steps by kind" not in full
    assert len(full.splitlines()) > len(lt.explain(step, source=False).splitlines())
    assert str(lt.explain(step, "summary")) == str(lt.explain(step))
    with pytest.raises(ValueError, match='"full"'):
        lt.explain(step, "everything")


def test_a_short_expression_prints_as_before():
    a = lt.asarray(np.arange(6.0).reshape(2, 3))
    e = lt.exp(a) * 2 + 1
    text = str(lt.explain(e))
    assert text == str(lt.explain(e, detail=True))
    assert "\n[1] FusedElementwise" in text and "steps by kind" not in text
    assert "steps by kind (1 steps" in str(lt.explain(e, detail=False))


def test_a_long_gradient_summarizes_unless_detail():
    rng = np.random.default_rng(0)
    w = lt.asarray(rng.standard_normal((4, 4)))
    x = lt.asarray(rng.standard_normal((3, 4)))
    h = x
    for _ in range(12):
        h = lt.relu(h @ w)
    loss = lt.sum(h)
    full = lt.explain_grad(loss, [w], detail=True)
    assert len(full.steps) > SUMMARY_OVER
    assert full.count("\n  [") == len(full.steps)
    text = lt.explain_grad(loss, [w])
    assert "steps by kind" in text and "\n  [1] " not in text
    assert len(text.splitlines()) < len(full.splitlines())


@pytest.mark.slow
def test_vgg16_bn_step_reads_in_a_screen():
    model = lt.nn.vgg16_bn(10, 32)
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    rng = np.random.default_rng(0)
    step(rng.standard_normal((2, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 2))
    text = str(lt.explain(step))
    assert len(text.splitlines()) < 60
    assert "backward: 13 of 13 Conv-BN blocks" in text and "  Conv2dStep on cpu: 13" in text.splitlines()
    assert lt.explain(step, "full", source=False).count("\n[") == len(step.last.plan.steps)
