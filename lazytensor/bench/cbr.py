"""CBR benchmark cases of `python -m lazytensor bench --suite cbr`: relu(batch_norm(conv2d(x, w))) in
training (forward) and inference, against peers and the floor measured in the same run.

CUDA (float16, then float32 NHWC activations, KRSC weights, float32 BN parameters; float32 with each
side's default math: TF32 convolutions, lt.config.conv_allow_tf32 and torch.backends.cudnn.allow_tf32),
shapes from the issue:
  ResNet-50 3x3 (N=128, 56x56, 64->64), (N=128, 14x14, 256->256), VGG (N=64, 224x224, 64->64).
  peers   PyTorch (when importable) cuDNN channels_last, same dtype: conv2d + batch_norm + relu (training);
          conv with BN folded into the weights and bias + relu (inference); conv alone.
  floor   the best conv plan alone (lazytensor's cuDNN conv, tuned plan) + one read and one write of
          the output at the streaming bandwidth measured in this run (a CuPy device-to-device copy).
  also    the apply + ReLU + mask stage alone against its floor (one read and one write of the output
          and one write of the 1-bit mask), and the host cost of one fused call on a small shape
          (N=8, 16x16, 64->64): time per call of an un-synchronized loop.
          The fused calls repeat over the same arrays, so after two calls they replay a captured
          CUDA graph (lazytensor.reuse.replay); the rows "steps one by one" time the same calls with
          replay off, each step launched from Python.
fwd+bwd rows (a training step with the fused backward, the first layer without dgrad, the dBN stage
  against its floor): lazytensor/bench/cbr_backward.py.
CPU (float32, small shapes so it runs anywhere): the same cases with NumPy (im2col + BLAS conv, then
  BN and ReLU as NumPy expressions, the unfused path) and lazytensor's unfused three-step evaluation
  as peers; floor = lazytensor's CPU conv alone + one read and one write of the output at the copy
  bandwidth. GPU times: CUDA events around bursts of back-to-back calls after a warm-up, median per call. Any peer that fails
  prints its error in the table instead of stopping the run.
"""
from __future__ import annotations

import statistics
import time
import traceback
from contextlib import contextmanager

import numpy as np

import lazytensor as lt
from lazytensor.reuse import replay
from lazytensor.bench.cbr_backward import torch_view
from lazytensor.bench.table import Table
from lazytensor.kernels.timing import burst_ms, time_host

CUDA_SHAPES = [  # (label, N, H, W, C, K)
    ("ResNet-50 3x3 N=128 56x56 64->64", 128, 56, 56, 64, 64),
    ("N=128 14x14 256->256", 128, 14, 14, 256, 256),
    ("VGG N=64 224x224 64->64", 64, 224, 224, 64, 64),
]
CPU_SHAPES = [
    ("N=8 28x28 64->64", 8, 28, 28, 64, 64),
    ("N=8 14x14 128->128", 8, 14, 14, 128, 128),
]
HOST_SHAPE = ("host cost, N=8 16x16 64->64", 8, 16, 16, 64, 64)


# -- timing ----------------------------------------------------------------------------------------

def _gpu_timer(cupy, warmup: int = 3, repeat: int = 9, burst: int = 10):
    def time_gpu(fn) -> float:
        """Median seconds per call of fn() over bursts of back-to-back calls (kernels/timing.py):
        the host work of a call overlaps the GPU work of the previous one, as in a training loop."""
        return burst_ms(fn, bursts=repeat, burst=burst, warmup=warmup) * 1e-3
    return time_gpu


def _guarded(table: Table, case: str, impl: str, measure):
    """Add measure()'s seconds as a row; a failure becomes a row marked failed and a note with the error."""
    try:
        seconds = measure()
    except Exception as e:  # noqa: BLE001 - a broken peer must not stop the benchmark
        table.add(case, f"{impl} (FAILED)", float("nan"))
        table.notes.append(f"{case} / {impl} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        table.notes.append("  " + traceback.format_exc(limit=2).strip().splitlines()[-1])
        return None
    table.add(case, impl, seconds)
    return seconds


@contextmanager
def _steps_one_by_one():
    """Graph replay off inside the block: every step is launched from Python."""
    enabled, replay.ENABLED = replay.ENABLED, False
    try:
        yield
    finally:
        replay.ENABLED = enabled


STEPS = "steps one by one (no graph replay)"


def _replay_state(case) -> str:
    """What lt.explain says of graph replay for the case's training call."""
    text = lt.explain(case.expression(True), out=case.out, source=False)
    return next((line for line in text.splitlines() if line.startswith("CUDA graph replay")), "no graph replay")


# -- the lazytensor calls --------------------------------------------------------------------------

class CbrCase:
    """Operands of one shape on one device, and the lazytensor calls to time."""

    def __init__(self, n, h, w, c, k, device, dtype, seed=0):
        rng = np.random.default_rng(seed)
        self.device, self.dtype = device, np.dtype(dtype)
        x = rng.standard_normal((n, h, w, c), dtype=np.float32).astype(dtype)
        wt = (rng.standard_normal((k, 3, 3, c), dtype=np.float32) / np.sqrt(9 * c)).astype(dtype)
        self.x_host, self.w_host = x, wt
        self.x = lt.asarray(x, device=device)
        self.w = lt.asarray(wt, device=device)
        self.gamma = lt.asarray(rng.uniform(0.5, 1.5, k).astype(np.float32), device=device)
        self.beta = lt.asarray(rng.uniform(-0.5, 0.5, k).astype(np.float32), device=device)
        self.running_mean = lt.zeros((k,), np.float32, device)
        self.running_var = lt.ones((k,), np.float32, device)
        self.out = lt.empty((n, h, w, k), dtype, device)
        self.conv_out = lt.empty((n, h, w, k), dtype, device)
        self.saved = lt.BatchNormSaved()

    def expression(self, training=True):
        return lt.relu(lt.batch_norm(lt.conv2d(self.x, self.w, padding=1), self.gamma, self.beta, self.running_mean,
                                     self.running_var, training=training, saved=self.saved))

    def fused(self, training=True):
        self.out[...] = self.expression(training)

    def unfused(self):
        conv = lt.evaluate(lt.conv2d(self.x, self.w, padding=1))
        bn = lt.evaluate(lt.batch_norm(conv, self.gamma, self.beta, self.running_mean, self.running_var))
        self.out[...] = lt.relu(bn)

    def conv_alone(self):
        self.conv_out[...] = lt.conv2d(self.x, self.w, padding=1)

    def apply_stage(self):
        """The apply + ReLU + mask step of the fused training plan, to run alone."""
        from lazytensor.plan.planner import plan
        steps = plan(self.expression(True), self.out.data, self.out.backend)
        for step in steps:
            step.run()                      # once, so that its inputs hold real values
        masked = [s for s in steps if getattr(s, "mask", None) is not None]
        if len(masked) != 1:
            raise RuntimeError("the plan has no apply + ReLU + mask kernel: "
                               + "; ".join(s.describe(False) for s in steps))
        last = masked[0]
        return last

    @property
    def out_bytes(self) -> int:
        return self.out.data.nbytes


# -- CUDA ------------------------------------------------------------------------------------------

def _cuda_bandwidth(cupy, time_gpu, nbytes: int = 1 << 30) -> float:
    """Bytes per second of a device-to-device copy, read + write counted."""
    src = cupy.ones(nbytes // 2, dtype=cupy.float16)
    dst = cupy.empty_like(src)
    seconds = time_gpu(lambda: dst.__setitem__(Ellipsis, src))
    src = dst = None
    return 2 * nbytes / seconds


def _torch():
    try:
        import torch
        if not torch.cuda.is_available():
            return None, "torch sees no CUDA device"
        torch.backends.cudnn.benchmark = True
        return torch, None
    except Exception as e:  # noqa: BLE001
        return None, f"PyTorch not importable ({type(e).__name__}: {e})"


class TorchPeer:
    """PyTorch cuDNN channels_last on the same data, in its dtype (shared through DLPack)."""

    def __init__(self, torch, case: CbrCase):
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        # NHWC / KRSC memory viewed as NCHW / KCRS: exactly PyTorch's channels_last layout
        self.x = torch_view(torch, case.x.data).permute(0, 3, 1, 2)
        self.w = torch_view(torch, case.w.data).permute(0, 3, 1, 2)
        assert self.x.is_contiguous(memory_format=torch.channels_last)
        k = self.w.shape[0]
        dev = self.x.device
        self.gamma = torch.from_dlpack(case.gamma.data).clone()
        self.beta = torch.from_dlpack(case.beta.data).clone()
        self.rm = torch.zeros(k, device=dev, dtype=torch.float32)
        self.rv = torch.ones(k, device=dev, dtype=torch.float32)
        # inference: BN folded into the weights and a bias (running stats (0, 1), eps 1e-5)
        scale = self.gamma / torch.sqrt(self.rv + 1e-5)
        dtype = self.w.dtype
        self.w_folded = (self.w.float() * scale.view(-1, 1, 1, 1)).to(dtype).contiguous(memory_format=torch.channels_last)
        self.b_folded = (self.beta - self.rm * scale).to(dtype)

    def train(self):
        F = self.F
        y = F.conv2d(self.x, self.w, padding=1)
        y = F.batch_norm(y, self.rm, self.rv, self.gamma, self.beta, training=True, momentum=0.1, eps=1e-5)
        return F.relu(y)

    def infer(self):
        return self.F.relu(self.F.conv2d(self.x, self.w_folded, self.b_folded, padding=1))

    def conv(self):
        return self.F.conv2d(self.x, self.w, padding=1)

    def run(self, fn):
        with self.torch.no_grad():
            return fn()


def run_cuda(print_fn=print, dtypes=(np.float16, lt.bfloat16, np.float32)) -> Table:
    import cupy
    time_gpu = _gpu_timer(cupy)
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    table = Table(f"lazytensor CBR benchmark on {name} ({', '.join(np.dtype(d).name for d in dtypes)} NHWC, 3x3, "
                  f"padding 1; CUDA events, median)", "PyTorch")
    bw = _cuda_bandwidth(cupy, time_gpu)
    table.notes.append(f"streaming bandwidth measured in this run (CuPy copy, read + write): {bw / 1e9:.0f} GB/s")
    torch, why_not = _torch()
    if torch is None:
        table.notes.append(f"no PyTorch peer: {why_not}")
    else:
        table.notes.append(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
                           f"cudnn.benchmark=True, channels_last, cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}")
    table.notes.append(f"lazytensor: lt.config.conv_allow_tf32={lt.config.conv_allow_tf32}")

    for (label, n, h, w, c, k), dtype in ((shape, d) for d in dtypes for shape in CUDA_SHAPES):
        label = f"{label} {np.dtype(dtype).name}"
        try:
            case = CbrCase(n, h, w, c, k, "cuda", dtype)
        except Exception as e:  # noqa: BLE001
            table.notes.append(f"{label}: could not build the operands: {type(e).__name__}: {e}")
            continue
        train, infer, apply_ = f"{label} train fwd", f"{label} inference", f"{label} apply+ReLU+mask"
        t_conv = _guarded(table, train, "conv alone (lazytensor, best plan)", lambda: time_gpu(case.conv_alone))
        if t_conv is not None:
            floor = t_conv + 2 * case.out_bytes / bw
            table.floor(train, floor, "best conv plan + 1 read + 1 write of the output")
            table.floor(infer, floor, "best conv plan + 1 read + 1 write of the output")
        _guarded(table, train, "lazytensor fused", lambda: time_gpu(lambda: case.fused(True)))
        if case.saved.path:
            table.notes.append(f"{label}: {case.saved.path}")
        table.notes.append(f"{label}: " + _replay_state(case))
        with _steps_one_by_one():
            _guarded(table, train, f"lazytensor fused, {STEPS}", lambda: time_gpu(lambda: case.fused(True)))
        _guarded(table, train, "lazytensor unfused (3 evaluations)", lambda: time_gpu(case.unfused))
        _guarded(table, infer, "lazytensor fused", lambda: time_gpu(lambda: case.fused(False)))
        with _steps_one_by_one():
            _guarded(table, infer, f"lazytensor fused, {STEPS}", lambda: time_gpu(lambda: case.fused(False)))
        if torch is not None:
            peer = None
            try:
                peer = TorchPeer(torch, case)
            except Exception as e:  # noqa: BLE001
                table.notes.append(f"{label}: PyTorch peer failed to set up: {type(e).__name__}: {e}")
            if peer is not None:
                _guarded(table, train, "PyTorch", lambda: time_gpu(lambda: peer.run(peer.train)))
                _guarded(table, infer, "PyTorch", lambda: time_gpu(lambda: peer.run(peer.infer)))
                _guarded(table, train, "PyTorch conv alone", lambda: time_gpu(lambda: peer.run(peer.conv)))
                try:   # same numbers? (training forward, batch statistics)
                    case.fused(True)
                    ref = peer.run(peer.train).permute(0, 2, 3, 1)
                    got = torch_view(torch, case.out.data)
                    table.notes.append(f"{label}: max |lazytensor - PyTorch| (train y) = "
                                       f"{(got.float() - ref.float()).abs().max().item():.3g}")
                except Exception as e:  # noqa: BLE001
                    table.notes.append(f"{label}: comparison with PyTorch failed: {type(e).__name__}: {e}")
        try:     # fwd+bwd: the fused backward (lazytensor/bench/cbr_backward.py)
            from lazytensor.bench.cbr_backward import add_rows, torch_peers
            peers = torch_peers(torch, case) if torch is not None else ()
            add_rows(table, label, case, time_gpu, bw, t_conv, _guarded, peers)
        except Exception as e:  # noqa: BLE001
            table.notes.append(f"{label}: fwd+bwd rows failed: {type(e).__name__}: {e}")
        try:
            step = case.apply_stage()
        except Exception as e:  # noqa: BLE001
            step = None
            table.notes.append(f"{label}: apply stage not isolated: {type(e).__name__}: {e}")
        if step is not None:
            _guarded(table, apply_, "lazytensor apply+ReLU+mask kernel", lambda: time_gpu(step.run))
            n_el = case.out.data.size
            table.floor(apply_, (2 * case.out_bytes + n_el / 8) / bw, "1 read + 1 write of the output + the mask")
            table.add(apply_, "CuPy copy of the output (read + write)", 2 * case.out_bytes / bw)
        case = None
        lt.release_graphs()                 # the graphs of this shape keep temporaries
        cupy.get_default_memory_pool().free_all_blocks()

    _host_cost(table, "cuda", np.float16, lambda: cupy.cuda.get_current_stream().synchronize())
    print_fn(table.render())
    return table


# -- host cost ---------------------------------------------------------------------------------------

def _host_cost(table: Table, device: str, dtype, sync, calls: int = 200):
    label, n, h, w, c, k = HOST_SHAPE
    try:
        case = CbrCase(n, h, w, c, k, device, dtype)
    except Exception as e:  # noqa: BLE001
        table.notes.append(f"{label}: could not build the operands: {type(e).__name__}: {e}")
        return

    def loop():
        for _ in range(calls):
            case.fused(True)

    def per_call():
        loop()                    # warm-up (plans, kernels, graphs cached)
        sync()
        rounds = []
        for _ in range(5):
            t = time.perf_counter()
            loop()                # no synchronisation inside: the host's time per call
            rounds.append((time.perf_counter() - t) / calls)
            sync()
        return statistics.median(rounds)

    _guarded(table, label, "lazytensor fused call (un-synchronized loop)", per_call)
    if device == "cuda":
        with _steps_one_by_one():
            _guarded(table, label, f"lazytensor fused call, {STEPS}", per_call)
    if device == "cpu":
        table.notes.append(f"{label}: on the CPU the time per call includes the computation")


# -- CPU -----------------------------------------------------------------------------------------------

def _cpu_bandwidth(nbytes: int = 1 << 27) -> float:
    src = np.random.rand(nbytes // 8)
    dst = np.empty_like(src)
    return 2 * src.nbytes / time_host(lambda: np.copyto(dst, src), repeat=7)


def _numpy_cbr(x, w, gamma, beta, running_mean, running_var, momentum=0.1, eps=1e-5):
    """The unfused path in NumPy: im2col + BLAS conv, then batch statistics, BN, ReLU, mask, running stats."""
    from lazytensor.cbr.conv_cpu import conv2d_nhwc
    y = conv2d_nhwc(x, w, 1, 1, 1)
    mean = y.mean(axis=(0, 1, 2))
    var = y.var(axis=(0, 1, 2))
    inv = 1.0 / np.sqrt(var + eps)
    out = np.maximum((y - mean) * (inv * gamma) + beta, 0)
    mask = np.packbits(out.ravel() > 0, bitorder="little")
    count = y.size // y.shape[-1]
    running_mean *= 1 - momentum
    running_mean += momentum * mean
    running_var *= 1 - momentum
    running_var += momentum * var * count / (count - 1)
    return out, mask


def run_cpu(print_fn=print) -> Table:
    table = Table("lazytensor CBR benchmark on the CPU (float32 NHWC, 3x3, padding 1; median of 7)", "NumPy")
    bw = _cpu_bandwidth()
    table.notes.append(f"copy bandwidth measured in this run: {bw / 1e9:.1f} GB/s (read + write)")
    for label, n, h, w, c, k in CPU_SHAPES:
        case = CbrCase(n, h, w, c, k, "cpu", np.float32)
        train, infer, apply_ = f"{label} train fwd", f"{label} inference", f"{label} apply+ReLU+mask"
        t_conv = _guarded(table, train, "conv alone (lazytensor)", lambda: time_host(case.conv_alone))
        if t_conv is not None:
            table.floor(train, t_conv + 2 * case.out_bytes / bw, "conv alone + 1 read + 1 write of the output")
            table.floor(infer, t_conv + 2 * case.out_bytes / bw, "conv alone + 1 read + 1 write of the output")
        _guarded(table, train, "lazytensor fused", lambda: time_host(lambda: case.fused(True)))
        _guarded(table, train, "lazytensor unfused (3 evaluations)", lambda: time_host(case.unfused))
        x, wt = case.x_host, case.w_host
        g, b = case.gamma.numpy(), case.beta.numpy()
        rm, rv = np.zeros(k, np.float32), np.ones(k, np.float32)
        _guarded(table, train, "NumPy", lambda: time_host(lambda: _numpy_cbr(x, wt, g, b, rm, rv)))
        _guarded(table, infer, "lazytensor fused", lambda: time_host(lambda: case.fused(False)))

        def numpy_folded():
            from lazytensor.cbr.conv_cpu import conv2d_nhwc
            scale = g / np.sqrt(case.running_var.numpy() + 1e-5)
            wf = (wt * scale[:, None, None, None]).astype(np.float32)
            bias = b - case.running_mean.numpy() * scale
            y = conv2d_nhwc(x, wf, 1, 1, 1)
            y += bias
            return np.maximum(y, 0, out=y)

        _guarded(table, infer, "NumPy", lambda: time_host(numpy_folded))
        try:     # fwd+bwd: the fused backward (lazytensor/bench/cbr_backward.py)
            from lazytensor.bench.cbr_backward import add_rows, numpy_peer
            add_rows(table, label, case, time_host, bw, t_conv, _guarded, numpy_peer(case))
        except Exception as e:  # noqa: BLE001
            table.notes.append(f"{label}: fwd+bwd rows failed: {type(e).__name__}: {e}")
        try:
            step = case.apply_stage()
            _guarded(table, apply_, "lazytensor apply+ReLU+mask kernel", lambda: time_host(step.run, repeat=15))
            table.floor(apply_, (2 * case.out_bytes + case.out.data.size / 8) / bw,
                        "1 read + 1 write of the output + the mask")
            y = case.conv_out.numpy()
            sc, bi = np.ones(k, np.float32), np.zeros(k, np.float32)

            def numpy_apply():
                out = np.maximum(y * sc + bi, 0)
                return out, np.packbits(out.ravel() > 0, bitorder="little")

            _guarded(table, apply_, "NumPy", lambda: time_host(numpy_apply, repeat=15))
        except Exception as e:  # noqa: BLE001
            table.notes.append(f"{label}: apply stage not isolated: {type(e).__name__}: {e}")
    table.notes.append("NumPy peers: training = the unfused path (conv, batch statistics, BN, ReLU, mask, running "
                       "statistics); inference = conv with BN folded into the weights and a bias, then ReLU")
    _host_cost(table, "cpu", np.float32, lambda: None, calls=20)
    print_fn(table.render())
    return table


def run_cbr_bench(print_fn=print, device: str = "cuda") -> Table:
    """Print (and return) the CBR table for `device` ("cuda" or "cpu")."""
    if device == "cuda":
        return run_cuda(print_fn)
    if device == "cpu":
        return run_cpu(print_fn)
    raise ValueError(f"device must be 'cuda' or 'cpu'; got {device!r}")
