"""2 ranks on half batches give 1 rank's whole-batch losses and weights (10 steps, float32)."""
import numpy as np
import pytest

from tests.distributed.launch import HERE, run


def _train(tmp_path, n, *args):
    out = tmp_path / f"run{n}.npz"
    done = run(n, [HERE / "worker.py", *args[:2], out, *args[2:]])
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out)


@pytest.mark.parametrize("kind, opt", [("mlp", "sgd"), ("vgg", "sgd"), ("mlp", "adamw")])
def test_two_ranks_equal_one(tmp_path, kind, opt):
    one, two = _train(tmp_path, 1, kind, opt), _train(tmp_path, 2, kind, opt)
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-6)
    for k in one.files:
        if k.startswith(("p", "b")):    # weights and SyncBatchNorm's running statistics
            scale = np.max(np.abs(one[k]))
            assert np.max(np.abs(two[k] - one[k])) <= 1e-6 * scale, k


def test_amp_skip_on_one_rank_skips_on_every_rank(tmp_path):
    # step 2's inf is in the last sample: on rank 1 only when sharded; rank 0 saves what it did
    one, two = _train(tmp_path, 1, "mlp", "sgd", 5, 2, 1), _train(tmp_path, 2, "mlp", "sgd", 5, 2, 1)
    assert list(two["skipped"]) == [False, False, True, False, False]
    assert list(one["skipped"]) == list(two["skipped"])
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-3)     # float16: ranks round apart


def test_explain_lists_the_buckets():
    import lazytensor as lt
    model = lt.nn.Sequential(lt.nn.Flatten(), lt.nn.Linear(48, 10, rng=np.random.default_rng(0)))
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1), distributed=True)
    step(np.zeros((4, 4, 4, 3), np.float32), np.zeros(4, np.int64))
    text = lt.explain(step, source=False, detail=True)
    assert "1 bucket of at most 25 MiB" in text
    assert "bucket 1: 2 gradients, 0.002 MiB" in text
    assert "CollectiveStep on cpu: all_reduce mean (gradient bucket 1 of 1)" in text


def test_one_rank_distributed_step_equals_the_plain_step():
    import lazytensor as lt
    from lazytensor.train.models import small_vgg
    runs = []
    for distributed in (False, True):
        m = lt.nn.convert_sync_batchnorm(small_vgg(seed=0))
        step = lt.train_step(m, lt.cross_entropy, lt.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
                             distributed=distributed)
        rng = np.random.default_rng(0)
        runs.append([float(step(rng.standard_normal((16, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 16)))
                     for _ in range(2)])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)
