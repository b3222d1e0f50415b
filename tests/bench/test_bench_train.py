"""`python -m lazytensor bench --suite train`: the CPU path runs in seconds (--quick), the table says
img/s, the speed-up over each peer and peak memory; the PyTorch peers' networks match lazytensor's
(where torch imports)."""
from __future__ import annotations

import pytest

from lazytensor.__main__ import main
from lazytensor.bench.train import LAZYTENSOR, Row, render


def test_the_cpu_suite_runs_quickly(monkeypatch, capsys):
    monkeypatch.setenv("LAZYTENSOR_BENCH_QUICK", "")        # restored after the test: --quick sets it
    assert main(["bench", "--suite", "train", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "lazytensor training-step benchmark on cpu (quick: a few steps, not a measurement)" in out
    row = next(line for line in out.splitlines() if line.startswith("| small VGG 32x32, batch 8 | lazytensor"))
    assert float(row.split("|")[3].replace(",", "")) > 0
    row = next(line for line in out.splitlines() if line.startswith("| ResNet-18 32x32, batch 16 | lazytensor"))
    assert float(row.split("|")[3].replace(",", "")) > 0
    for rule in ("LARS", "LAMB"):       # the layerwise rules' rows, their parameters in one region
        row = next(line for line in out.splitlines() if line.startswith(f"| small VGG 32x32, batch 8, {rule} | lazytensor"))
        assert float(row.split("|")[3].replace(",", "")) > 0
        note = next(line for line in out.splitlines() if line.startswith(f"small VGG 32x32, batch 8, {rule}, lazytensor"))
        assert note.endswith("steps per call, parameters in 1 regions"), note


@pytest.mark.parametrize("rule", ["LARS", "LAMB"])
def test_the_torch_peers_run_lazytensors_layerwise_rules(rule):
    """The PyTorch peer's LARS and LAMB (torch ops) against the float64 rules of tests/nn."""
    torch = pytest.importorskip("torch")
    import numpy as np
    from lazytensor.bench.torch_layerwise import layerwise_optimizer
    from tests.nn.test_optim_layerwise import lamb_reference, lars_reference
    rng = np.random.default_rng(0)
    shapes = [(3,), (4, 5), ()]
    w0 = [np.asarray(rng.standard_normal(s)) for s in shapes]
    grads = [[np.asarray(rng.standard_normal(s)) for s in shapes] for _ in range(20)]
    for g in grads:
        g[2] = np.zeros(())             # a zero gradient: its norm is 0, the ratio 1
    params = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in w0]
    kw = dict(lr=0.1, momentum=0.9, weight_decay=1e-2, trust_coefficient=0.02) if rule == "LARS" else \
        dict(lr=0.01, weight_decay=1e-2)
    opt = layerwise_optimizer(torch, rule, params, **kw)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    for i, w in enumerate(w0):
        gs = [g[i] for g in grads]
        want = (lars_reference(w, gs, 0.1, 0.9, 1e-2, 0.02) if rule == "LARS" else
                lamb_reference(w, gs, 0.01, 0.9, 0.999, 1e-6, 1e-2))
        np.testing.assert_allclose(params[i].detach().numpy(), want, rtol=1e-10, atol=1e-12)


def test_the_table_gives_lazytensors_speed_up_over_each_peer():
    rows = [Row("VGG16-BN 32x32, batch 512", LAZYTENSOR + " (AMP)", 120_000.0, 3 << 30),
            Row("VGG16-BN 32x32, batch 512", "PyTorch AMP eager", 60_000.0, 4 << 30),
            Row("VGG16-BN 32x32, batch 512", "PyTorch AMP CUDA graph", 80_000.0, 5 << 30),
            Row("VGG16-BN 32x32, batch 512", "PyTorch torch.compile", None, None, "failed: RuntimeError: no")]
    text = render(rows, "cuda", torch=object())
    lines = text.splitlines()
    assert "| VGG16-BN 32x32, batch 512 | lazytensor lt.train_step (AMP) | 120,000 | - | 3.00 GiB |" in lines
    assert "| VGG16-BN 32x32, batch 512 | PyTorch AMP eager | 60,000 | 2.00x | 4.00 GiB |" in lines
    assert "| VGG16-BN 32x32, batch 512 | PyTorch AMP CUDA graph | 80,000 | 1.50x | 5.00 GiB |" in lines
    assert "| VGG16-BN 32x32, batch 512 | PyTorch torch.compile | - | - | - |" in lines
    assert "VGG16-BN 32x32, batch 512, PyTorch torch.compile: failed: RuntimeError: no" in lines
    assert "torch does not import" in render(rows[:1], "cuda", torch=None)


@pytest.mark.parametrize("name, px, classes", [("small_vgg", 32, 10), ("vgg16bn", 32, 10), ("resnet18", 32, 10),
                                                  ("resnet50", 224, 1000)])
def test_the_torch_peers_have_lazytensors_parameters(name, px, classes):
    torch = pytest.importorskip("torch")
    from lazytensor.bench.torch_models import build
    from lazytensor.train.models import build_model
    ours = build_model(name, px, classes, device="cpu")
    theirs = build(torch, name, px, classes)
    assert sorted(tuple(p.shape) for p in ours.parameters()) == sorted(
        tuple(p.permute(0, 2, 3, 1).shape) if p.ndim == 4 else tuple(p.shape) for p in theirs.parameters())


@pytest.mark.gpu
@pytest.mark.slow
def test_the_cuda_suite_runs_every_configuration(monkeypatch):
    """Every configuration has a lazytensor figure and a peak; the peers where torch sees the GPU."""
    import lazytensor as lt
    if not lt.cuda_usable():
        pytest.skip("needs CuPy and a CUDA device")
    from lazytensor.bench.train import run_train_bench
    monkeypatch.setenv("LAZYTENSOR_BENCH_QUICK", "1")
    lines = []
    rows = run_train_bench(lines.append, "cuda")
    ours = [r for r in rows if r.implementation.startswith(LAZYTENSOR)]
    assert len(ours) == 5 and all(r.images_per_s and r.peak_bytes for r in ours), lines[0]     # 3 SGD, LARS, LAMB


def test_the_float32_table_prints_each_sides_tf32_settings():
    import lazytensor as lt
    rows = [Row("VGG16-BN 32x32, batch 128", LAZYTENSOR, 30_000.0, 1 << 30),
            Row("VGG16-BN 32x32, batch 128", "PyTorch float32 eager", 20_000.0, 2 << 30)]
    torch = type("torch", (), {"backends": type("b", (), {"cudnn": type("c", (), {"allow_tf32": True}),
                                                           "cuda": type("m", (), {"matmul": type("mm", (), {
                                                               "allow_tf32": False})})})})
    lines = render(rows, "cuda", torch=torch, amp=None).splitlines()
    assert "| VGG16-BN 32x32, batch 128 | PyTorch float32 eager | 20,000 | 1.50x | 2.00 GiB |" in lines
    want = (f"float32, no AMP: lt.config.conv_allow_tf32={lt.config.conv_allow_tf32}, matmul_allow_tf32=False; "
            "torch.backends.cudnn.allow_tf32=True, torch.backends.cuda.matmul.allow_tf32=False")
    assert want in lines, lines
    assert not any("GradScaler" in line for line in lines)


def test_the_train_suite_takes_float16_bfloat16_or_float32():
    from lazytensor.bench.train import run_train_bench
    with pytest.raises(ValueError, match="float16, bfloat16, float32; got 'float64'"):
        run_train_bench(print, "cpu", "float64")
    with pytest.raises(SystemExit):
        main(["bench", "--suite", "train", "--dtype", "bfloat8"])
    with pytest.raises(SystemExit):
        main(["bench", "--suite", "train", "--dtype", "float32", "--amp", "bfloat16"])


@pytest.mark.gpu
@pytest.mark.slow
def test_the_cuda_float32_suite_runs_every_configuration(monkeypatch):
    import lazytensor as lt
    if not lt.cuda_usable():
        pytest.skip("needs CuPy and a CUDA device")
    from lazytensor.bench.train import run_train_bench
    monkeypatch.setenv("LAZYTENSOR_BENCH_QUICK", "1")
    lines = []
    rows = run_train_bench(lines.append, "cuda", "float32")
    ours = [r for r in rows if r.implementation.startswith(LAZYTENSOR)]
    assert len(ours) == 2 and all(r.images_per_s and r.peak_bytes for r in ours), lines[0]
    assert all("(AMP)" not in r.implementation for r in ours)
