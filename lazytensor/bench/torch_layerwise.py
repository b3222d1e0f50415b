"""LARS and LAMB for the PyTorch peers of the train suite, written in torch ops with lazytensor's
rules (lazytensor.nn.optim; PyTorch has neither): per parameter, the norms and the guard as tensor
ops (torch.where, no host read), the step count on the device, so the step can be captured into a
CUDA graph as SGD's is. Imported only where torch is."""
from __future__ import annotations


def layerwise_optimizer(torch, name: str, params, **kw):
    """`name` "LARS" or "LAMB": a torch.optim.Optimizer over `params` following lazytensor's rule."""
    return {"LARS": _lars, "LAMB": _lamb}[name](torch)(params, **kw)


def _ratio(torch, numerator, denominator, wn, other):
    ok = (wn > 0) & (other > 0)
    return torch.where(ok, numerator / torch.where(ok, denominator, torch.ones_like(denominator)),
                       torch.ones_like(numerator))


def _lars(torch):
    class LARS(torch.optim.Optimizer):
        """local = tc |w| / (|g| + wd |w|) (1 unless both norms > 0); d = (g + wd w) local;
        buf = d on the first step, else momentum buf + d; w -= lr buf."""

        def __init__(self, params, lr, momentum=0.9, weight_decay=0.0, trust_coefficient=0.001):
            super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                          trust_coefficient=trust_coefficient))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                lr, mom, wd, tc = group["lr"], group["momentum"], group["weight_decay"], group["trust_coefficient"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g, state = p.grad, self.state[p]
                    if not state:
                        state["buf"] = torch.zeros_like(p)
                        state["taken"] = torch.zeros((), device=p.device)
                    wn, gn = torch.linalg.vector_norm(p), torch.linalg.vector_norm(g)
                    d = (g + wd * p) * _ratio(torch, tc * wn, gn + wd * wn, wn, gn)
                    buf = state["buf"]
                    buf.copy_(torch.where(state["taken"] > 0, mom * buf + d, d))
                    state["taken"].add_(1)
                    p.sub_(lr * buf)
    return LARS


def _lamb(torch):
    class LAMB(torch.optim.Optimizer):
        """m, v as Adam; u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd w;
        ratio = |w| / |u| (1 unless both norms > 0); w -= lr ratio u."""

        def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
            super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g, state = p.grad, self.state[p]
                    if not state:
                        state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                        state["taken"] = torch.zeros((), device=p.device)
                    state["taken"].add_(1)
                    t = state["taken"]
                    m, v = state["m"], state["v"]
                    m.mul_(b1).add_((1 - b1) * g)
                    v.mul_(b2).add_((1 - b2) * g * g)
                    u = (m / (1 - b1 ** t)) / (torch.sqrt(v / (1 - b2 ** t)) + eps) + wd * p
                    wn, un = torch.linalg.vector_norm(p), torch.linalg.vector_norm(u)
                    p.sub_(lr * _ratio(torch, wn, un, wn, un) * u)
    return LAMB
