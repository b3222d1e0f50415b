"""Parameters in regions on CUDA (GPU only): VGG16-BN in AMP updates every parameter with one kernel
per region and checks found_inf with one reduction per region, in fewer steps than per parameter and
with the same weights; an MLP's step over regions equals the per-parameter step bit for bit."""
import numpy as np
import pytest

import lazytensor as lt
from tests.support.devices import cudnn_ready

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cudnn_ready(), reason="needs CUDA, CuPy and the cuDNN frontend")]


def _vgg_step(regions, opt):
    model = lt.nn.vgg16_bn(10, 32, dtype=np.float16, device="cuda")
    params = model.parameters()
    optimizer = (lt.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4, regions=regions) if opt == "sgd" else
                 lt.optim.AdamW(params, lr=1e-3, regions=regions))
    return model, optimizer, lt.train_step(model, lt.cross_entropy, optimizer, amp=True)


@pytest.mark.xfail(reason="over CUDA parameters the region updates do not yet give the per-parameter step's values "
                          "(measured on the H200); regions are opt-in there", strict=False)
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
def test_vgg16_bn_amp_updates_one_kernel_per_region(opt):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32, 32, 3)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    got, counts = [], []
    for regions in (False, True):
        model, optimizer, step = _vgg_step(regions, opt)
        for _ in range(3):
            step(x, y)
        steps = step.last.plan.steps
        counts.append(len(steps))
        got.append([p.numpy().astype(np.float32) for p in model.parameters()])
        if regions:
            sizes = {u.weights.size for u in optimizer.units}
            assert len(optimizer.units) == 2             # float16 convolutions and linears, float32 BatchNorm
            updates = [s for s in steps if type(s).__name__ == "MultiOutputElementwise" and s.out.size in sizes]
            assert len(updates) == 2, [s.describe(False).splitlines()[0] for s in updates]
            found = [s for s in steps if "Reduction" in type(s).__name__ and getattr(s, "inputs", None)
                     and any(getattr(a, "size", 0) in sizes for a in s.inputs)]
            assert len(found) <= 2
    print(f"\nVGG16-BN AMP {opt}: steps per call {counts[0]} per parameter, {counts[1]} over regions")
    assert counts[1] < counts[0]
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-3)


@pytest.mark.xfail(reason="over CUDA parameters the region updates do not yet give the per-parameter step's values "
                          "(measured on the H200); regions are opt-in there", strict=False)
def test_mlp_step_over_regions_equals_the_per_parameter_step_on_cuda():
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((64, 32)).astype(np.float32), device="cuda")
    y = lt.asarray(rng.integers(0, 10, 64), device="cuda")
    weights = [rng.standard_normal(s).astype(np.float32) * 0.2 for s in [(48, 32), (48,), (10, 48), (10,)]]
    got = []
    for regions in (False, True):
        model = lt.nn.Sequential(lt.nn.Linear(32, 48, device="cuda"), lt.nn.ReLU(), lt.nn.Linear(48, 10, device="cuda"))
        for p, w in zip(model.parameters(), weights):
            p[...] = lt.asarray(w, device="cuda")
        opt = lt.optim.AdamW(model.parameters(), lr=1e-2, regions=regions)
        step = lt.train_step(model, lt.cross_entropy, opt, max_grad_norm=1.0)
        for _ in range(4):
            step(x, y)
        got.append([p.numpy() for p in model.parameters()])
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


@pytest.mark.xfail(reason="over CUDA parameters the region updates do not yet give the per-parameter step's values; "
                          "this matrix says which part (bias gradients by the GEMM epilogue, the optimizer, "
                          "train_step's graph) differs", strict=False)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("opt", ["sgd", "adamw"])
@pytest.mark.parametrize("recorded", [False, True])
def test_one_mlp_step_over_regions_equals_the_per_parameter_step(bias, opt, recorded):
    rng = np.random.default_rng(0)
    x = lt.asarray(rng.standard_normal((64, 32)).astype(np.float32), device="cuda")
    y = lt.asarray(rng.integers(0, 10, 64), device="cuda")
    shapes = [(48, 32), (48,), (10, 48), (10,)] if bias else [(48, 32), (10, 48)]
    weights = [rng.standard_normal(s).astype(np.float32) * 0.2 for s in shapes]
    got = []
    for regions in (False, True):
        model = lt.nn.Sequential(lt.nn.Linear(32, 48, bias=bias, device="cuda"), lt.nn.ReLU(),
                                 lt.nn.Linear(48, 10, bias=bias, device="cuda"))
        for p, w in zip(model.parameters(), weights):
            p[...] = lt.asarray(w, device="cuda")
        params = model.parameters()
        optimizer = (lt.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4, regions=regions) if opt == "sgd"
                     else lt.optim.AdamW(params, lr=1e-2, regions=regions))
        step = lt.train_step(model, lt.cross_entropy, optimizer) if recorded else None
        for _ in range(2):
            if recorded:
                step(x, y)
            else:
                optimizer.step(lt.grad(lt.cross_entropy(model(x), y), params))
        got.append([p.numpy() for p in model.parameters()])
    for k, (a, b) in enumerate(zip(*got)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {k} {shapes[k]}")
