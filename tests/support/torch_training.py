"""The same small networks trained by PyTorch and by lt.train_step from identical weights (PyTorch's,
through load_state_dict) and identical batches: the losses per step, the weights after training and
the eval outputs, for tests/nn/test_train_step_torch.py (CPU) and tests/nn/test_train_step_gpu.py (CUDA).
Imports torch only when called."""
from __future__ import annotations

import numpy as np

import lazytensor as lt

CLASSES = 10


def torch_net(kind: str, torch):
    nn = torch.nn
    blocks = [nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
              nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    if kind == "vgg":       # Conv-BN-ReLU blocks, max pooling, a Linear
        return nn.Sequential(*blocks, nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, CLASSES))
    # all convolutions: a 1x1 classifier and global average pooling (no matmul step)
    return nn.Sequential(*blocks, nn.Conv2d(16, CLASSES, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def lt_net(kind: str, device, dtype):
    n = lt.nn
    rng = np.random.default_rng(0)
    blocks = [n.Conv2d(3, 8, 3, padding=1, bias=False, dtype=dtype, device=device, rng=rng), n.BatchNorm2d(8, device=device),
              n.ReLU(), n.Conv2d(8, 16, 3, padding=1, bias=False, dtype=dtype, device=device, rng=rng),
              n.BatchNorm2d(16, device=device), n.ReLU()]
    if kind == "vgg":
        return n.Sequential(*blocks, n.MaxPool2d(2), n.Flatten(),
                            n.Linear(16 * 4 * 4, CLASSES, dtype=dtype, device=device, rng=rng, nchw_input=(16, 4, 4)))
    return n.Sequential(*blocks, n.Conv2d(16, CLASSES, 1, dtype=dtype, device=device, rng=rng), n.GlobalAvgPool())


def train_both(kind: str, device: str = "cpu", amp=False, steps: int = 30, batch: int = 16, lr=0.02):
    """-> (torch losses, lt losses, torch state dict, lt state dict (PyTorch's layout), torch eval
    output, lt eval output) after `steps` SGD steps (momentum 0.9, weight decay 5e-4). amp: False,
    True (float16 autocast with loss scaling) or "bfloat16" (bfloat16 autocast, no loss scaling)."""
    import torch
    torch.manual_seed(0)
    tdev = torch.device(device)
    tmodel = torch_net(kind, torch).to(tdev)
    state = {k: v.detach().cpu().numpy() for k, v in tmodel.state_dict().items()}
    dtype = lt.bfloat16 if amp == "bfloat16" else np.float16 if amp else np.float32
    autocast = torch.bfloat16 if amp == "bfloat16" else torch.float16
    model = lt_net(kind, device, dtype)
    model.load_state_dict(state)          # before the optimizer: float16 parameters' masters copy them
    opt = lt.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    step = lt.train_step(model, lt.cross_entropy, opt, amp=amp)
    topt = torch.optim.SGD(tmodel.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(device, enabled=amp is True) if amp else None
    rng = np.random.default_rng(1)
    want, got = [], []
    tmodel.train()
    for _ in range(steps):
        x = rng.standard_normal((batch, 8, 8, 3)).astype(np.float32)
        y = rng.integers(0, CLASSES, batch)
        tx, ty = torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(tdev), torch.from_numpy(y).to(tdev)
        topt.zero_grad(set_to_none=True)
        if amp:
            with torch.autocast(device, dtype=autocast):
                logits = tmodel(tx)
            loss = torch.nn.functional.cross_entropy(logits.float(), ty)
            scaler.scale(loss).backward()
            scaler.step(topt)
            scaler.update()
        else:
            loss = torch.nn.functional.cross_entropy(tmodel(tx), ty)
            loss.backward()
            topt.step()
        want.append(float(loss.detach().cpu()))
        got.append(step(lt.asarray(x, device=device), lt.asarray(y, device=device)))
    got = [float(v.numpy()) for v in got]          # read at the end: no host sync inside the loop
    x = rng.standard_normal((batch, 8, 8, 3)).astype(np.float32)
    tmodel.eval()
    model.eval()
    with torch.no_grad():
        if amp:
            with torch.autocast(device, dtype=autocast):
                t_eval = tmodel(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(tdev)).float()
        else:
            t_eval = tmodel(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()).to(tdev))
    xs = lt.asarray(x.astype(dtype), device=device)
    lt_eval = lt.evaluate(model(xs)).numpy().astype(np.float32)
    t_state = {k: v.detach().cpu().numpy() for k, v in tmodel.state_dict().items() if "num_batches" not in k}
    return want, got, t_state, model.state_dict(), t_eval.cpu().numpy(), lt_eval, step


def assert_close(result, rtol, atol):
    want, got, t_state, state, t_eval, lt_eval, _ = result
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg="loss per step")
    for name, value in t_state.items():
        scale = max(float(np.abs(value).max()), 1e-3)
        np.testing.assert_allclose(state[name].astype(np.float32), value, rtol=rtol, atol=atol * scale, err_msg=name)
    np.testing.assert_allclose(lt_eval, t_eval, rtol=rtol, atol=atol * max(float(np.abs(t_eval).max()), 1.0),
                               err_msg="eval outputs after training")


def assert_amp_close(kind: str, device: str, rtol: float = 2e-2):
    """lt.train_step in AMP against PyTorch's AMP (autocast float16 + GradScaler) over 30 steps.

    float16 rounding makes any two AMP runs drift apart step by step: PyTorch's own AMP run ends as
    far from its float32 run (the first BatchNorm's bias, a sum of 1024 float16 gradients that
    nearly cancel, by several percent of its scale; all of the small VGG's weights by 10-25% after
    30 steps at lr 0.02, measured on the CPU). So, besides the loss of each of the 30 steps (to
    rtol), the weights and eval outputs are compared after 3 steps to rtol of each tensor's scale,
    and after 30 steps each tensor may be twice as far from PyTorch's AMP as PyTorch's AMP is from
    its float32 run (two roundings' drifts vary by that much: the small VGG's first conv weight was
    1.17x), plus rtol of its scale. A wrong gradient drifts by far more: gradients divided by twice
    the loss scale fail the losses already."""
    amp = train_both(kind, device, amp=True)
    np.testing.assert_allclose(amp[1], amp[0], rtol=rtol, err_msg="loss per step (AMP)")
    assert not amp[-1].scaler.found_inf.numpy()
    assert_close(train_both(kind, device, amp=True, steps=3), rtol=rtol, atol=rtol)
    fp32 = train_both(kind, device)
    for name, value in amp[2].items():
        scale = max(float(np.abs(value).max()), 1e-3)
        drift = float(np.abs(fp32[2][name] - value).max())
        got = float(np.abs(amp[3][name].astype(np.float32) - value).max())
        assert got <= 2 * drift + rtol * scale, (f"{name} after 30 AMP steps: {got:.3g} from PyTorch's AMP, whose own "
                                             f"drift from float32 is {drift:.3g} (scale {scale:.3g})")
