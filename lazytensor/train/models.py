"""The networks `python -m lazytensor train` and `bench --suite train` build, by name.

vgg16bn, resnet18 and resnet50 are lt.nn's builders (torchvision's structures; VGG at 32 px is
the CIFAR variant: its classifier reads the 1 x 1 x 512 last feature map). `small_vgg` is a VGG in
miniature (two Conv-BN-ReLU blocks with max pooling, global average pooling and one Linear) that
trains in seconds on a CPU: for smoke runs, the tests and the training notebook.
"""
from __future__ import annotations

import numpy as np

from lazytensor.nn.layers import ConvBNReLU, Flatten, GlobalAvgPool, Linear, MaxPool2d, Sequential
from lazytensor.nn.models import resnet18, resnet50, vgg16_bn


def small_vgg(num_classes: int = 10, widths=(16, 32), dtype=np.float32, device=None, seed: int = 0) -> Sequential:
    """Conv-BN-ReLU and 2x2 max pooling per width, then global average pooling and a Linear."""
    rng = np.random.default_rng(seed)
    layers, c = [], 3
    for w in widths:
        layers += [ConvBNReLU(c, w, 3, 1, 1, dtype=dtype, device=device, rng=rng), MaxPool2d(2, 2)]
        c = w
    layers += [GlobalAvgPool(), Flatten(), Linear(c, num_classes, dtype=dtype, device=device, rng=rng)]
    return Sequential(*layers)


MODELS = ("vgg16bn", "resnet18", "resnet50", "small_vgg")


def build_model(name: str, px: int, num_classes: int, dtype=np.float32, device=None, seed: int = 0):
    """One of MODELS for px x px inputs, its weights in `dtype` (float16 for lt.train_step's AMP,
    which keeps float32 master weights; BatchNorm stays float32)."""
    if name == "vgg16bn":
        return vgg16_bn(num_classes, input_size=px, dtype=dtype, device=device, seed=seed)
    if name == "resnet18":
        return resnet18(num_classes, dtype=dtype, device=device, seed=seed)
    if name == "resnet50":
        return resnet50(num_classes, dtype=dtype, device=device, seed=seed)
    if name == "small_vgg":
        return small_vgg(num_classes, dtype=dtype, device=device, seed=seed)
    raise ValueError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")
