"""Run under mpiexec by tests/distributed: N steps of a model on this rank's shard of a fixed global
batch, the losses and final weights saved by rank 0 to argv's npz path."""
import sys

import numpy as np

import lazytensor as lt
from lazytensor import distributed as dist


def model_of(kind, rng):
    if kind == "mlp":
        return lt.nn.Sequential(lt.nn.Flatten(), lt.nn.Linear(48, 32, rng=rng), lt.nn.ReLU(),
                                lt.nn.Linear(32, 10, rng=rng))
    if kind == "vgg":
        m = lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, rng=rng), lt.nn.BatchNorm2d(8), lt.nn.ReLU(),
                             lt.nn.MaxPool2d(2), lt.nn.Conv2d(8, 8, 3, padding=1, rng=rng), lt.nn.BatchNorm2d(8),
                             lt.nn.ReLU(), lt.nn.GlobalAvgPool(), lt.nn.Linear(8, 10, rng=rng))
        return lt.nn.convert_sync_batchnorm(m)
    raise ValueError(kind)


def main(kind, opt, out, steps=10, inject=-1, amp="0"):
    r, n = dist.init()
    rng = np.random.default_rng(0)
    dtype = np.float16 if amp == "1" else np.float32
    model = model_of(kind, np.random.default_rng(1 + r))     # different on each rank: the broadcast must fix it
    if amp == "1":
        model = lt.nn.Sequential(lt.nn.Flatten(), lt.nn.Linear(48, 32, dtype=dtype, rng=np.random.default_rng(1)),
                                 lt.nn.ReLU(), lt.nn.Linear(32, 10, dtype=dtype, rng=np.random.default_rng(2)))
    params = model.parameters()
    optimizer = lt.optim.SGD(params, lr=0.1, momentum=0.9) if opt == "sgd" else lt.optim.AdamW(params, lr=1e-2)
    step = lt.train_step(model, lt.cross_entropy, optimizer, distributed=True, amp=amp == "1")
    losses, skipped = [], []
    for k in range(int(steps)):
        x = rng.standard_normal((8, 4, 4, 3)).astype(np.float32)
        y = rng.integers(0, 10, 8)
        if k == int(inject):
            x[-1, 0, 0, 0] = np.inf         # the last sample: on the last rank when sharded
        xs = dist.shard(x)
        if amp == "1":
            xs = xs.astype(np.float16)
        losses.append(float(step(xs, dist.shard(y))))
        if step.scaler is not None:
            skipped.append(bool(step.scaler.found_inf))
    if r == 0:
        weights = {f"p{i}": np.asarray(p, dtype=np.float64) for i, p in enumerate(params)}
        for i, (_, b) in enumerate(model.named_buffers()):
            weights[f"b{i}"] = np.asarray(b)
        np.savez(out, losses=np.array(losses), skipped=np.array(skipped), **weights)
        print(lt.explain(step).splitlines()[2:6] if False else "", end="")


if __name__ == "__main__":
    main(*sys.argv[1:])
