"""Every conv dtype through the cuDNN graphs, checked on the CPU: which graph takes which dtype, the
cuDNN types each graph declares, the engines barred by numerical note (TF32 for strict float32, as
PyTorch), the TF32 flag in the graph key and the experience tables' key, lt.config's switches and
the errors and warnings of the host-fallback rule. The graphs run in
tests/plan/conv/test_float32_cuda_gpu.py (-m gpu)."""
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr import cudnn_dtypes, cudnn_graphs
from lazytensor.cbr.conv_key import ConvKey
from lazytensor.cbr.cudnn_errors import CudnnGraphRejected
from lazytensor.cbr.cudnn_graphs import GraphKind, build_conv_graph
from lazytensor.cbr.cudnn_support import cudnn_shape_refusal
from lazytensor.kernels import config as config_module
from lazytensor.kernels.cuda import cublas_gemm
from tests.plan.conv.test_cbr_backward_graphs import FakeGraph, NotSupported

NOTES = SimpleNamespace(TENSOR_CORE="TENSOR_CORE", DOWN_CONVERT_INPUTS="DOWN_CONVERT_INPUTS")


class ForwardFakeGraph(FakeGraph):
    def conv_fprop(self, **kw):
        self.log.append(("conv_fprop", kw))
        return self._tensor(name="y")

    def genstats(self, **kw):
        self.log.append(("genstats", kw))
        return self._tensor(name="sum"), self._tensor(name="sum_sq")

    def mul(self, **kw): return self._tensor_unlisted("scaled")
    def add(self, **kw): return self._tensor_unlisted("shifted")
    def relu(self, **kw): return self._tensor(name="y")

    def _tensor_unlisted(self, name):
        from tests.plan.conv.test_cbr_backward_graphs import FakeTensor
        return FakeTensor(self.log, 100 + len(self.log), name=name)

    def deselect_numeric_notes(self, notes):
        self.log.append(("deselect_numeric_notes", list(notes)))


@pytest.fixture
def frontend(monkeypatch):
    log = []
    fake = SimpleNamespace(
        data_type=SimpleNamespace(HALF="HALF", FLOAT="FLOAT", DOUBLE="DOUBLE", BFLOAT16="BFLOAT16"),
        heur_mode=SimpleNamespace(A="A", FALLBACK="FALLBACK"), numerical_note=NOTES,
        cudnnGraphNotSupportedError=NotSupported, pygraph=lambda **kw: ForwardFakeGraph(log, **kw))
    monkeypatch.setattr(cudnn_graphs, "import_cuda_modules", lambda: (None, fake))
    return log


def key(dtype, tf32=False):
    return ConvKey.of((2, 9, 11, 8), (16, 3, 3, 8), dtype, 1, 1, 1, tf32)


def _deselected(log):
    return [notes for name, *rest in log if name == "deselect_numeric_notes" for notes in rest]


@pytest.mark.parametrize("dtype, io, acc", [("float32", "FLOAT", "FLOAT"), ("float64", "DOUBLE", "DOUBLE"),
                                            ("float16", "HALF", "FLOAT")])
@pytest.mark.parametrize("kind", [GraphKind.CONV, GraphKind.CONV_DGRAD, GraphKind.CONV_WGRAD])
def test_each_conv_graph_declares_the_dtype_it_is_keyed_by(frontend, kind, dtype, io, acc):
    g = build_conv_graph(kind, key(dtype), handle="h")
    (_, made), = [e for e in frontend if e[0] == "pygraph"]
    assert made["io_data_type"] == io and made["compute_data_type"] == acc == made["intermediate_data_type"]
    assert all(t.fields["data_type"] == io for t in g.graph.tensors), [t.fields for t in g.graph.tensors]
    (_, conv), = [e for e in frontend if e[0].startswith("conv_")]
    assert conv["compute_data_type"] == acc


@pytest.mark.parametrize("dtype, tf32, barred", [
    ("float32", False, ["DOWN_CONVERT_INPUTS", "TENSOR_CORE"]),     # strict float32: no tensor-core engine
    ("float32", True, ["DOWN_CONVERT_INPUTS"]),                     # TF32 allowed: never down-converted inputs
    ("float64", False, ["DOWN_CONVERT_INPUTS"]),
    ("float16", False, []),                                         # float16 engines as before
    ("float16", True, []),
])
def test_engines_are_barred_by_numerical_note(frontend, dtype, tf32, barred):
    build_conv_graph(GraphKind.CONV, key(dtype, tf32), handle="h")
    assert _deselected(frontend) == ([barred] if barred else [])
    names = [e[0] for e in frontend]
    if barred:          # after the plans are listed, before cuDNN checks them
        assert names.index("plans") < names.index("deselect_numeric_notes") < names.index("check_support")


def test_genstats_is_float16_only_and_the_inference_graph_not_float64(frontend):
    with pytest.raises(CudnnGraphRejected, match=r"no conv_fprop \+ genstats engine in float32 \(only float16\)"):
        build_conv_graph(GraphKind.CONV_GENSTATS, key("float32"), handle="h")
    with pytest.raises(CudnnGraphRejected, match="conv_scale_bias_relu graph takes bfloat16, float16, float32; got "
                                                 "float64"):
        build_conv_graph(GraphKind.CONV_SCALE_BIAS_RELU, key("float64"), handle="h")
    assert not [e for e in frontend if e[0] == "pygraph"]          # refused before any description
    g = build_conv_graph(GraphKind.CONV_SCALE_BIAS_RELU, key("float32"), handle="h")
    assert g.graph.kw["io_data_type"] == "FLOAT"


def test_the_dtype_tables():
    assert cudnn_dtypes.graph_refusal("conv", np.float32) is None
    assert cudnn_dtypes.graph_refusal("conv_genstats", np.float16) is None
    assert "only float16" in cudnn_dtypes.graph_refusal("conv_genstats", np.float32)
    assert cudnn_dtypes.graph_refusal("dbn_relu", np.float64) is not None
    assert cudnn_dtypes.uses_tf32(np.float32, True) and not cudnn_dtypes.uses_tf32(np.float16, True)
    assert not cudnn_dtypes.uses_tf32(np.float32, False)
    assert "TF32 tensor cores allowed" in cudnn_dtypes.math_words(np.float32, True)
    assert "strict" in cudnn_dtypes.math_words(np.float32, False)
    assert cudnn_dtypes.math_words(np.float16, False) == "float16 (float32 accumulation)"
    # bfloat16 is keyed by name: the tables take it the day the dtype exists
    assert cudnn_dtypes.CUDNN_TYPES["bfloat16"] == ("BFLOAT16", "FLOAT")
    assert "bfloat16" in cudnn_dtypes.GRAPH_DTYPES["conv"] and "bfloat16" not in cudnn_dtypes.GRAPH_DTYPES["conv_genstats"]


def test_shape_refusals_for_every_dtype():
    for dtype in ("float16", "float32", "float64"):
        assert cudnn_shape_refusal((8, 56, 56, 64), (64, 3, 3, 64), dtype) is None
        assert "pad C to 8" in cudnn_shape_refusal((8, 32, 32, 3), (64, 3, 3, 3), dtype)
    assert "got int8" in cudnn_shape_refusal((8, 56, 56, 64), (64, 3, 3, 64), "int8")


def test_tf32_is_part_of_the_key_for_float32_only():
    assert key("float32", True) != key("float32", False)
    assert key("float16", True) == key("float16", False) and not key("float16", True).tf32
    text = key("float32", True).table_key()
    assert "_float32_tf32_st" in text and ConvKey.from_table_key(text) == key("float32", True)
    assert ConvKey.from_table_key(key("float32").table_key()) == key("float32")
    assert key("float16").table_key() == "n2_h9_w11_c8_k16_r3_s3_float16_st1x1_pad1x1_dil1x1"   # tables unchanged


# -- lt.config ---------------------------------------------------------------------------------------------

def test_the_config_switches_have_pytorchs_defaults_and_check_their_values():
    assert config_module._DEFAULTS == {"conv_allow_tf32": True, "matmul_allow_tf32": False, "allow_host": False}
    with pytest.raises(TypeError, match=r"lt.config.allow_host takes True or False; got 1"):
        lt.config.allow_host = 1
    with pytest.raises(AttributeError, match="no switch 'allow_tf32'.*conv_allow_tf32, matmul_allow_tf32"):
        lt.config.allow_tf32 = True
    with pytest.raises(AttributeError, match="no switch 'cudnn'"):
        lt.config.cudnn
    before = lt.config.state()
    with lt.config.override(matmul_allow_tf32=True, allow_host=True):
        assert lt.config.matmul_allow_tf32 and lt.config.allow_host
    assert lt.config.state() == before
    assert "torch.backends.cudnn.allow_tf32" in lt.config.describe()


def test_a_change_of_a_switch_drops_the_kept_plans():
    from lazytensor.reuse import recipes
    x = lt.asarray(np.ones((4, 4), np.float32))
    out = lt.empty((4, 4), dtype=np.float32)
    out[...] = lt.sum(x, axis=0, keepdims=True) + x          # a heavy plan, kept as a recipe
    assert recipes.count() >= 1
    with lt.config.override(matmul_allow_tf32=True):
        assert recipes.count() == 0
    out[...] = lt.sum(x, axis=0, keepdims=True) + x
    np.testing.assert_array_equal(out.numpy(), np.full((4, 4), 5.0))


def test_cublas_compute_type_follows_the_matmul_switch():
    assert cublas_gemm.compute_type(np.float32) == cublas_gemm._COMPUTE_32F
    assert cublas_gemm.compute_type(np.float16) == cublas_gemm._COMPUTE_32F
    assert cublas_gemm.compute_type(np.float64) == cublas_gemm._COMPUTE_64F
    assert "strict" in cublas_gemm.math_words(np.float32)
    with lt.config.override(matmul_allow_tf32=True):
        assert cublas_gemm.compute_type(np.float32) == cublas_gemm._COMPUTE_32F_FAST_TF32 == 77
        assert cublas_gemm.compute_type(np.float64) == cublas_gemm._COMPUTE_64F
        assert "TF32" in cublas_gemm.math_words(np.float32)


def test_host_or_raise_names_the_op_the_reason_and_the_fixes(monkeypatch):
    monkeypatch.setattr(config_module, "_warned", set())
    with pytest.raises(lt.UnsupportedOnDevice) as e:
        config_module.host_or_raise("conv2d of x (1, 2, 2, 8)", "no engine", "cast x to float32")
    text = str(e.value)
    assert text.startswith("conv2d of x (1, 2, 2, 8) cannot run on the GPU: no engine. To fix: cast x to float32; "
                           "or set lt.config.allow_host = True"), text
    assert e.value.op == "conv2d of x (1, 2, 2, 8)" and e.value.reason == "no engine"
    with lt.config.override(allow_host=True), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            config_module.host_or_raise("conv2d of x (1, 2, 2, 8)", "no engine")
    assert len(seen) == 1 and issubclass(seen[0].category, lt.HostFallbackWarning), seen
    assert "runs on the host and is copied back" in str(seen[0].message)


def test_cublas_data_types_are_keyed_by_dtype_name():
    table = cublas_gemm._DATA_TYPE
    assert table[np.float16] == 2 and table[np.dtype(np.float32)] == 0 and table["float64"] == 1
    assert np.int32 not in table and "not a dtype" not in table
    assert dict.__getitem__(table, "bfloat16") == 14      # CUDA_R_16BF, for ml_dtypes' bfloat16
    _, why = cublas_gemm.arguments_for(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32),
                                       np.zeros((2, 2), np.int32))
    assert "int32 operands" in why


def test_a_train_step_plans_again_under_other_switches():
    from tests.nn.test_train_step import batches, mlp
    model = mlp()
    step = lt.train_step(model, lt.cross_entropy, lt.optim.SGD(model.parameters(), lr=0.1))
    data = batches(3)
    step(*data[0])
    first = step.last
    step(*data[1])
    assert step.last is first                   # the same switches: the recorded plan again
    with lt.config.override(matmul_allow_tf32=True):
        step(*data[2])
    assert step.last is not first               # its plan baked the old switches in
