"""The cuDNN conv_dgrad / conv_wgrad graph descriptions, checked on the CPU against a stand-in for the
frontend binding that records every call: dims in N, C, H, W order with channels-last strides, the
output dims set by hand (cuDNN cannot infer them), float16 outputs (dW included), float32 compute.
The graphs themselves run in tests/plan/conv/test_conv_backward_gpu.py (-m gpu)."""
from types import SimpleNamespace

import pytest

from lazytensor.cbr import cudnn_graphs
from lazytensor.cbr.conv_key import ConvKey
from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
from lazytensor.cbr.cudnn_graphs import GraphKind, build_conv_graph


class FakeTensor:
    def __init__(self, log, uid, **fields):
        self.log, self.uid, self.fields = log, uid, dict(fields)

    def _set(self, name, value):
        self.fields[name] = value
        return self

    def set_output(self, v): return self._set("output", v)
    def set_data_type(self, v): return self._set("data_type", v)
    def set_dim(self, v): return self._set("dim", list(v))
    def set_stride(self, v): return self._set("stride", list(v))
    def get_uid(self): return self.uid


class FakeGraph:
    def __init__(self, log, **kw):
        self.log, self.kw, self.tensors = log, kw, []
        log.append(("pygraph", kw))

    def _tensor(self, **fields):
        t = FakeTensor(self.log, len(self.tensors) + 1, **fields)
        self.tensors.append(t)
        return t

    def tensor(self, **kw):
        return self._tensor(**kw)

    def conv_dgrad(self, **kw):
        self.log.append(("conv_dgrad", kw))
        return self._tensor(name="dx")

    def conv_wgrad(self, **kw):
        self.log.append(("conv_wgrad", kw))
        return self._tensor(name="dw")

    def validate(self): self.log.append(("validate",))
    def build_operation_graph(self): self.log.append(("build_operation_graph",))
    def create_execution_plans(self, modes): self.log.append(("plans", modes))
    def check_support(self): self.log.append(("check_support",))


class NotSupported(Exception):
    pass


@pytest.fixture
def frontend(monkeypatch):
    log = []
    fake = SimpleNamespace(
        data_type=SimpleNamespace(HALF="HALF", FLOAT="FLOAT"),
        heur_mode=SimpleNamespace(A="A", FALLBACK="FALLBACK"),
        cudnnGraphNotSupportedError=NotSupported,
        pygraph=lambda **kw: FakeGraph(log, **kw),
    )
    monkeypatch.setattr(cudnn_graphs, "import_cuda_modules", lambda: (None, fake))
    return log


KEY = ConvKey.of((2, 9, 11, 8), (16, 3, 1, 8), "float16", stride=(2, 1), padding=(1, 0), dilation=(1, 2))


def nhwc(n, c, h, w):
    return [n, c, h, w], [h * w * c, 1, w * c, c]


def test_dgrad_graph(frontend):
    g = build_conv_graph(GraphKind.CONV_DGRAD, KEY, handle="h")
    assert g.roles == ("dy", "w", "dx")
    (_, conv), = [e for e in frontend if e[0] == "conv_dgrad"]
    assert conv["padding"] == [1, 0] and conv["stride"] == [2, 1] and conv["dilation"] == [1, 2]
    assert conv["compute_data_type"] == "FLOAT"
    n, p, q, k = KEY.out_shape
    dy, w, dx = (t.fields for t in g.graph.tensors)
    assert conv["loss"].fields is dy and conv["filter"].fields is w
    assert (dy["dim"], dy["stride"]) == nhwc(n, k, p, q) and dy["data_type"] == "HALF"
    assert (w["dim"], w["stride"]) == nhwc(16, 8, 3, 1)
    assert (dx["dim"], dx["stride"]) == nhwc(2, 8, 9, 11)      # set by hand
    assert dx["output"] is True and dx["data_type"] == "HALF"
    assert [e[0] for e in frontend[-4:]] == ["validate", "build_operation_graph", "plans", "check_support"]
    assert g.uid_order == (1, 2, 3)


def test_wgrad_graph_writes_dw_in_float16(frontend):
    g = build_conv_graph(GraphKind.CONV_WGRAD, KEY, handle="h")
    assert g.roles == ("x", "dy", "dw")
    (_, conv), = [e for e in frontend if e[0] == "conv_wgrad"]
    dy, x, dw = (t.fields for t in g.graph.tensors)
    assert conv["image"].fields is x and conv["loss"].fields is dy
    assert (x["dim"], x["stride"]) == nhwc(2, 8, 9, 11)
    assert (dw["dim"], dw["stride"]) == nhwc(16, 8, 3, 1)        # KRSC strides, set by hand
    assert dw["output"] is True and dw["data_type"] == "HALF"   # a FLOAT dW gets one slow plan
    assert g.uid_order == (2, 1, 3)                              # roles x, dy, dw


def test_a_rejection_is_a_graph_rejected(frontend, monkeypatch):
    def refuse(self):
        raise NotSupported("no engine for this dgrad")
    monkeypatch.setattr(FakeGraph, "check_support", refuse)
    with pytest.raises(CudnnGraphRejected, match="conv_dgrad.*no engine for this dgrad"):
        build_conv_graph(GraphKind.CONV_DGRAD, KEY, handle="h")
    # conv_fprop + genstats has engines in float16 only (cuDNN 9.19): no graph is described for float32
    with pytest.raises(CudnnGraphRejected, match="no conv_fprop \\+ genstats engine in float32 \\(only float16\\)"):
        build_conv_graph(GraphKind.CONV_GENSTATS, ConvKey.of((2, 9, 11, 8), (16, 3, 1, 8), "float32"), handle="h")
