"""lt.nn: modules' structure and names as torchvision's, state dicts in PyTorch's layout, and a small
network's forward against a float64 NumPy reference built from the same weights."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.cbr.batchnorm_reference import batchnorm_train_reference
from lazytensor.cbr.conv_reference import conv2d_nhwc_reference

from tests.support.oracles import pool_reference


def test_parameter_counts_are_torchvisions():
    assert sum(p.size for p in lt.nn.resnet18(1000).parameters()) == 11_689_512
    assert sum(p.size for p in lt.nn.resnet50(1000).parameters()) == 25_557_032


def test_state_dict_names_follow_torchvision():
    names = list(lt.nn.resnet18(10).state_dict())
    for name in ("conv1.weight", "bn1.running_var", "layer1.0.conv2.weight", "layer2.0.downsample.0.weight",
                 "layer2.0.downsample.1.running_mean", "layer4.1.bn2.bias", "fc.weight", "fc.bias"):
        assert name in names
    vgg = lt.nn.vgg16_bn(10, 32).state_dict()
    assert vgg["features.0.weight"].shape == (64, 3, 3, 3)          # KCRS, as PyTorch stores it
    assert vgg["features.1.running_var"].shape == (64,)
    assert vgg["classifier.0.weight"].shape == (4096, 512)


def test_state_dict_round_trip_and_layout_conversion():
    rng = np.random.default_rng(0)
    model = lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, rng=rng), lt.nn.BatchNorm2d(8), lt.nn.ReLU(),
                             lt.nn.Flatten(), lt.nn.Linear(8 * 4 * 4, 5, rng=rng, nchw_input=(8, 4, 4)))
    torch_like = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in model.state_dict().items()}
    torch_like["1.running_var"] = np.abs(torch_like["1.running_var"]) + 0.5
    torch_like["1.num_batches_tracked"] = np.array(3)          # PyTorch's counter is ignored
    model.load_state_dict(torch_like)
    back = model.state_dict()
    for k, v in back.items():
        np.testing.assert_array_equal(v, torch_like[k])
    # KCRS -> KRSC for the conv; the Linear's columns from NCHW to NHWC order
    np.testing.assert_array_equal(model[0].weight.numpy(), torch_like["0.weight"].transpose(0, 2, 3, 1))
    x_nchw = rng.standard_normal((2, 8, 4, 4)).astype(np.float32)
    want = x_nchw.reshape(2, -1) @ torch_like["4.weight"].T           # PyTorch's flatten of NCHW
    lin = model[4]
    got = lt.evaluate(lin(lt.nn.Flatten()(lt.asarray(x_nchw.transpose(0, 2, 3, 1).copy())))).numpy()
    np.testing.assert_allclose(got, want + torch_like["4.bias"], rtol=1e-5, atol=1e-5)
    with pytest.raises(KeyError, match="missing"):
        model.load_state_dict({})
    with pytest.raises(ValueError, match="shape"):
        model.load_state_dict({**torch_like, "0.weight": np.zeros((8, 3, 5, 5), np.float32)})


def test_small_network_forward_against_float64_reference():
    rng = np.random.default_rng(1)
    model = lt.nn.Sequential(lt.nn.Conv2d(3, 8, 3, padding=1, bias=False, dtype=np.float64, rng=rng),
                             lt.nn.BatchNorm2d(8), lt.nn.ReLU(), lt.nn.MaxPool2d(2),
                             lt.nn.Flatten(), lt.nn.Linear(8 * 3 * 3, 4, dtype=np.float64, rng=rng))
    x = rng.standard_normal((2, 6, 6, 3))
    got = lt.evaluate(model(lt.asarray(x))).numpy()
    w = model[0].weight.numpy()
    y = conv2d_nhwc_reference(x, w, 1, 1)
    bn = batchnorm_train_reference(y, np.ones(8), np.zeros(8), np.zeros(8), np.ones(8))
    y = np.maximum(bn.y, 0)
    y = pool_reference("max", y, (2, 2), (2, 2), (0, 0))
    want = y.reshape(2, -1) @ model[5].weight.numpy().T + model[5].bias.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)   # BN statistics and affine maps are float32
    np.testing.assert_allclose(model[1].running_mean.numpy(), bn.running_mean, rtol=1e-6, atol=1e-7)
    model.eval()
    assert not any(m.training for _, m in model.named_modules())


def test_models_run_forward_on_small_inputs():
    x = lt.asarray(np.random.default_rng(2).standard_normal((2, 32, 32, 3)).astype(np.float32))
    assert lt.evaluate(lt.nn.vgg16_bn(10, 32)(x)).shape == (2, 10)
    assert lt.evaluate(lt.nn.resnet18(7)(x)).shape == (2, 7)
