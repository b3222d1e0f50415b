"""The fused CBR backward (stage 1 drelu + dBN, the backward patterns, wgrad and dgrad with dX in X's
memory) against the unfused rules and float64 central finite differences, on the CPU."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import lazytensor as lt
import lazytensor.autodiff as autodiff
from lazytensor.autodiff.patterns import BACKWARD_PATTERNS, matching_pattern
from lazytensor.autodiff.patterns_cbr import CbrBackward
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference
from lazytensor.reuse.conv_grads import WgradThenDgrad, plan_conv_grads
from tests.support.cbr_backward_cases import Forward, cbr_cases, operands, unfused_gradients
from tests.support.conv_grad_reference import batch_norm_reference, central_differences

SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
grad = getattr(autodiff, "grad", None)
needs_grad = pytest.mark.skipif(grad is None, reason="lazytensor.autodiff has no grad yet")


def fused_gradients(f: Forward, dy) -> dict:
    pattern = matching_pattern(f.root)
    if f.x.dtype == np.float64:             # float64 takes the per-op rules; the fused path on request
        assert pattern is None
        pattern = CbrBackward(f.form)
        assert pattern.parts(f.root) is not None
    assert isinstance(pattern, CbrBackward) and pattern.form == f.form
    grads = pattern.gradients(f.root, lt.asarray(dy, device=f.x.device))
    by_name = {name: grads[t] for name, t in f.operands().items()}
    assert set(grads) == set(f.operands().values())
    return {k: lt.evaluate(v).numpy() for k, v in by_name.items()}


def assert_close(got, want, what, rtol):
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(np.asarray(got, np.float64) - want).max())
    assert err <= rtol * scale, f"{what}: max |error| {err:.3g} against max |reference| {scale:.3g}"


@SETTINGS
@given(cbr_cases())
def test_fused_backward_matches_the_unfused_rules(case):
    x_shape, w_shape, stride, padding, dilation, form, seed = case
    rng, x, w, gamma, beta = operands(x_shape, w_shape, form, seed, np.float32)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    out_shape = lt.conv2d(lt.asarray(x), lt.asarray(w), **kw).shape
    skip = rng.standard_normal(out_shape).astype(np.float32)
    f = Forward(x, w, gamma, beta, skip, form, kw)
    dy = rng.standard_normal(out_shape).astype(np.float32)
    got, want = fused_gradients(f, dy), unfused_gradients(f, dy)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert_close(got[name], want[name], name, 2e-4)


def _loss(x, w, gamma, beta, skip, form, kw, eps, g):
    y = batch_norm_reference(conv2d_nhwc_reference(x, w, **kw), gamma, beta, None, None, True, eps)
    if form == "residual":
        y = y + skip
    return ((np.maximum(y, 0) if form != "bn" else y) * g).sum()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cbr_cases(max_hw=4, max_c=2, ks=(1, 3, 8)))
def test_fused_backward_matches_finite_differences(case):
    x_shape, w_shape, stride, padding, dilation, form, seed = case
    rng, x, w, gamma, beta = operands(x_shape, w_shape, form, seed)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    out_shape = lt.conv2d(lt.asarray(x), lt.asarray(w), **kw).shape
    skip = rng.standard_normal(out_shape)
    f = Forward(x, w, gamma, beta, skip, form, kw)
    pre = batch_norm_reference(conv2d_nhwc_reference(x, w, **kw), gamma, beta, None, None, True, f.eps)
    if form == "residual":
        pre = pre + skip
    assume(form == "bn" or np.abs(pre).min() > 1e-3)        # no ReLU kink within the differences' step
    g = rng.standard_normal(out_shape)
    got = fused_gradients(f, g)
    args = dict(x=x, w=w, gamma=gamma.astype(np.float64), beta=beta.astype(np.float64), skip=skip)
    for name in got:
        def loss(a, name=name):
            return _loss(**{**args, name: a}, form=form, kw=kw, eps=f.eps, g=g)
        # the saved statistics are float32, so the fused backward of float64 activations is as
        # accurate as float32 batch statistics, amplified where a channel's values nearly agree
        assert_close(got[name], central_differences(loss, args[name]), name, 1e-3)


@pytest.mark.parametrize("k", [8, 5])
def test_the_backward_reads_the_forwards_mask_bit_for_bit(k):
    # the mask the forward's last kernel wrote, as the backward interprets it: d(skip) = dY * mask with
    # dY = 1 is the mask itself, element by element, in the NHWC order the forward packed it in
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((3, 5, 7, 2)).astype(np.float32), rng.standard_normal((k, 3, 3, 2)).astype(np.float32)
    gamma, beta = rng.standard_normal(k).astype(np.float32), rng.standard_normal(k).astype(np.float32)
    kw = dict(stride=1, padding=1, dilation=1)
    skip = rng.standard_normal((3, 5, 7, k)).astype(np.float32)
    f = Forward(x, w, gamma, beta, skip, "residual", kw)
    mask = f.saved.relu_mask.numpy()
    assert mask.dtype == np.uint8 and mask.shape == ((f.y.size + 7) // 8,)
    bits = np.unpackbits(mask, bitorder="little")[: f.y.size].reshape(f.y.shape)
    np.testing.assert_array_equal(bits, f.y > 0)            # what the forward wrote
    _, _, _, d_skip = lt.cbr_bn_backward(lt.ones(f.y.shape, np.float32), f.saved, f.gamma, residual=True)
    np.testing.assert_array_equal(lt.evaluate(d_skip).numpy(), (f.y > 0).astype(np.float32))   # what it reads


def _small_forward(form="relu", k=8, evaluate=True, seed=0):
    rng, x, w, gamma, beta = operands((2, 4, 4, 3), (k, 3, 3, 3), form, seed, np.float32)
    skip = rng.standard_normal((2, 4, 4, k)).astype(np.float32)
    return rng, Forward(x, w, gamma, beta, skip, form, dict(padding=1), evaluate=evaluate)


def test_stage_one_is_one_reduction_then_one_kernel_and_writes_no_masked_gradient():
    rng, f = _small_forward()
    d_conv, _, _, _ = lt.cbr_bn_backward(lt.asarray(rng.standard_normal(f.y.shape).astype(np.float32)),
                                        f.saved, f.gamma)
    steps = lt.explain(d_conv, source=False).steps
    kinds = [type(s).__name__ for s in steps]
    assert kinds == ["GridReduction", "GridElementwise"], kinds


def test_a_channel_count_not_a_multiple_of_8_unpacks_the_mask_and_says_so():
    rng, f = _small_forward(k=5)
    d_conv, _, _, _ = lt.cbr_bn_backward(lt.asarray(rng.standard_normal(f.y.shape).astype(np.float32)),
                                        f.saved, f.gamma)
    text = str(lt.explain(d_conv, source=False))
    assert "unpacked" in text and "not a multiple of 8" in text


def test_a_training_loop_rebinds_the_backward_to_each_forward():
    # the plan recipe is reused over new saved arrays: each iteration reads its own forward
    for seed in range(3):
        rng, f = _small_forward(form="residual", seed=seed)
        dy = rng.standard_normal(f.y.shape).astype(np.float32)
        got, want = fused_gradients(f, dy), unfused_gradients(f, dy)
        for name in want:
            assert_close(got[name], want[name], name, 2e-4)


# -- bad input ------------------------------------------------------------------------------------

def test_a_forward_never_evaluated_raises():
    _, f = _small_forward(evaluate=False)
    with pytest.raises(ValueError, match="never evaluated"):
        lt.cbr_bn_backward(lt.ones(f.root.shape, np.float32), f.saved, f.gamma)
    # lt.grad takes the fused pattern over the forward's own plan instead (tests/plan/conv/test_cbr_in_plan.py)
    assert not matching_pattern(f.root).saved_in_holder(f.root)


def test_a_forward_only_planned_by_explain_raises():
    _, f = _small_forward(evaluate=False)
    lt.explain(f.root)                                  # puts arrays in the holder without computing them
    with pytest.raises(ValueError, match="never ran"):
        lt.cbr_bn_backward(lt.ones(f.root.shape, np.float32), f.saved, f.gamma)
    _, f = _small_forward()             # evaluated: explaining it again plans nothing (it is its value),
    lt.explain(f.root)                  # so the holder keeps the forward's results
    lt.evaluate(lt.cbr_bn_backward(lt.ones(f.root.shape, np.float32), f.saved, f.gamma)[0])


def test_released_results_raise():
    _, f = _small_forward()
    f.saved.release()
    with pytest.raises(ValueError, match="released"):
        lt.cbr_bn_backward(lt.ones(f.root.shape, np.float32), f.saved, f.gamma)


def test_a_forward_without_its_relu_mask_raises():
    rng, f = _small_forward(form="bn")
    with pytest.raises(ValueError, match="no ReLU mask"):
        lt.cbr_bn_backward(lt.ones(f.root.shape, np.float32), f.saved, f.gamma, relu=True)


def test_a_backward_reads_the_forward_it_was_built_after():
    # a later forward into the same holder leaves an earlier-built backward with its own forward's values
    rng, f = _small_forward(seed=1)
    dy = rng.standard_normal(f.y.shape).astype(np.float32)
    want = unfused_gradients(f, dy)
    d_conv, dgamma, dbeta, _ = lt.cbr_bn_backward(lt.asarray(dy), f.saved, f.gamma)
    other = lt.batch_norm(lt.conv2d(lt.asarray(rng.standard_normal(f.x.shape).astype(np.float32)), f.w, padding=1),
                          f.gamma, f.beta, *f.running, saved=f.saved)
    lt.evaluate(lt.relu(other))
    assert_close(lt.evaluate(dgamma).numpy(), want["gamma"], "dgamma", 2e-4)
    assert_close(lt.evaluate(dbeta).numpy(), want["beta"], "dbeta", 2e-4)


# -- the patterns, the first layer ----------------------------------------------------------------

def test_the_patterns_are_registered_in_order():
    forms = [p.form for p in BACKWARD_PATTERNS if isinstance(p, CbrBackward)]
    assert forms == ["residual", "relu", "bn"]


def test_the_first_layer_plans_no_dgrad():
    rng, f = _small_forward()
    grads = matching_pattern(f.root).gradients(f.root, lt.asarray(rng.standard_normal(f.y.shape).astype(np.float32)))
    steps = lt.explain(grads[f.w], source=False).steps       # dW alone: x is training data
    kinds = [getattr(s, "kind", type(s).__name__) for s in steps]
    assert "wgrad" in kinds and "dgrad" not in kinds, kinds
    # told which gradients are wanted, the pattern builds no dX and explain says why
    wanted = [f.w, f.gamma, f.beta]
    grads = matching_pattern(f.root).gradients(f.root, lt.asarray(np.ones(f.y.shape, np.float32)), wanted)
    assert f.x not in grads.keys() and set(grads) == {f.w, f.gamma, f.beta}
    text = str(lt.explain(grads[f.w], source=False))
    assert "first layer" in text and "no dgrad is planned" in text


@needs_grad
@pytest.mark.parametrize("form", ["relu", "residual", "bn"])
def test_lt_grad_takes_the_fused_backward(form):
    rng, f = _small_forward(form=form)
    dy = rng.standard_normal(f.y.shape).astype(np.float32)
    names = list(f.operands())
    got = grad(f.root, [f.operands()[n] for n in names], grad_output=lt.asarray(dy))
    want = unfused_gradients(f, dy)
    for name, g in zip(names, got):
        assert_close(lt.evaluate(g).numpy(), want[name], name, 2e-4)


# -- stages 2 and 3: the write hazard -------------------------------------------------------------

def _hazard_case():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    w = lt.asarray(rng.standard_normal((8, 3, 3, 3)).astype(np.float32))
    conv = lt.conv2d(lt.asarray(x), w, stride=1, padding=1)
    return x, w, conv.attrs, lt.asarray(rng.standard_normal(conv.shape).astype(np.float32))


def test_dx_in_x_memory_gives_the_same_dw_and_dx():
    x, w, attrs, d_conv = _hazard_case()
    dx, dw = lt.conv_grads(d_conv, lt.asarray(x.copy()), w, attrs)
    x_tensor = lt.asarray(x.copy())
    dx2, dw2 = lt.conv_grads(d_conv, x_tensor, w, attrs, dx_in_x=True)
    assert dx2.data is x_tensor.data                          # dX took X's memory
    np.testing.assert_array_equal(dw2.numpy(), dw.numpy())
    np.testing.assert_array_equal(dx2.numpy(), dx.numpy())
    assert_close(dw.numpy(), lt.evaluate(lt.conv2d_backward_filter(lt.asarray(x), d_conv, w.shape, attrs)).numpy(),
                 "dw", 1e-5)


def test_dgrad_before_wgrad_would_read_a_clobbered_x():
    # the stand-in with the order removed (dgrad first) computes dW from dX, not from X: the order matters
    x, w, attrs, d_conv = _hazard_case()
    _, right = lt.conv_grads(d_conv, lt.asarray(x.copy()), w, attrs)

    class DgradFirst(WgradThenDgrad):
        __slots__ = ()
        order = ("dgrad", "wgrad")

    steps, _, dw = plan_conv_grads(d_conv, lt.asarray(x.copy()), w, attrs, dx_in_x=True)
    pair = steps[-1]
    assert isinstance(pair, WgradThenDgrad) and pair.order == ("wgrad", "dgrad")
    for step in steps[:-1]:
        step.run()
    DgradFirst(pair.backend, pair.wgrad, pair.dgrad, True).run()
    assert np.abs(dw - right.numpy()).max() > 1e-3


def test_dx_in_x_is_explained_and_checked():
    x, w, attrs, d_conv = _hazard_case()
    steps, _, _ = plan_conv_grads(d_conv, lt.asarray(x.copy()), w, attrs, dx_in_x=True)
    assert "dgrad runs only after wgrad has read X" in steps[-1].describe(False)
    with pytest.raises(TypeError, match="must be an evaluated Tensor"):
        lt.conv_grads(d_conv, lt.asarray(x) * 1.0, w, attrs, dx_in_x=True)
    with pytest.raises(ValueError, match="cannot hold"):
        lt.conv_grads(d_conv.astype(np.float64), lt.asarray(x.copy()), w, attrs, dx_in_x=True)


def test_stage_one_is_planned_once_and_rebound():
    # the kernels hold the arrays, not views of them, so a plan recipe rebinds them (and CUDA can replay)
    from lazytensor.reuse import recipes
    rng, f = _small_forward(form="residual")
    dy = lt.asarray(rng.standard_normal(f.y.shape).astype(np.float32))
    d_conv, _, _, d_skip = lt.cbr_bn_backward(dy, f.saved, f.gamma, residual=True)
    for expr in (d_conv, d_skip):
        out = lt.empty(expr.shape, expr.dtype)
        out[...] = expr
        key = recipes.signature(expr, out.data)[0]
        assert isinstance(recipes._recipes.get(key), recipes.Recipe)


@pytest.mark.parametrize("form", ["relu", "residual"])
def test_float16_activations_on_the_cpu(form):
    # float16 conv output and dY, computed in float32 as the unfused rules do; float32 dgamma and dbeta
    rng, x, w, gamma, beta = operands((2, 5, 5, 8), (16, 3, 3, 8), form, 4, np.float16)
    skip = rng.standard_normal((2, 5, 5, 16)).astype(np.float16)
    f = Forward(x, w, gamma, beta, skip, form, dict(padding=1))
    dy = rng.standard_normal(f.y.shape).astype(np.float16)
    got, want = fused_gradients(f, dy), unfused_gradients(f, dy)
    assert got["gamma"].dtype == got["beta"].dtype == np.float32 and got["x"].dtype == np.float16
    for name in want:
        assert_close(got[name], want[name], name, 2e-2)


def test_inference_and_unevaluated_forms_take_the_per_op_rules():
    rng, x, w, gamma, beta = operands((2, 4, 4, 3), (8, 3, 3, 3), "relu", 0, np.float32)
    running = lt.zeros((8,), np.float32), lt.ones((8,), np.float32)
    bn = lt.batch_norm(lt.conv2d(lt.asarray(x), lt.asarray(w), padding=1), lt.asarray(gamma), lt.asarray(beta),
                       *running, training=False)
    assert matching_pattern(lt.relu(bn)) is None and matching_pattern(bn) is None


def test_bad_arguments_say_what_to_pass():
    _, f = _small_forward()
    with pytest.raises(ValueError, match=r"dy has shape \(2, 4, 4, 7\).*gradient of that output"):
        lt.cbr_bn_backward(lt.ones((2, 4, 4, 7), np.float32), f.saved, f.gamma)
    with pytest.raises(TypeError, match="BatchNormSaved"):
        lt.cbr_bn_backward(lt.ones(f.y.shape, np.float32), {}, f.gamma)
    with pytest.raises(ValueError, match="residual=True.*needs relu=True"):
        lt.cbr_bn_backward(lt.ones(f.y.shape, np.float32), f.saved, f.gamma, relu=False, residual=True)
    with pytest.raises(ValueError, match=r"gamma must have shape \(8,\)"):
        lt.cbr_bn_backward(lt.ones(f.y.shape, np.float32), f.saved, lt.ones((3,), np.float32))
