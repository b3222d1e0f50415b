"""VGG16-BN and ResNet-18/50, NHWC, named as torchvision names them so that state dicts carry over.

Initialisation follows torchvision: convolutions kaiming_normal(fan_out, relu), BatchNorm weight 1 and
bias 0; VGG's classifier N(0, 0.01) with zero bias; ResNet's fc PyTorch's Linear default.
Deliberate differences from torchvision, both for the fused Conv-BN-ReLU path and for runs that
can be compared with PyTorch step by step:
- VGG's convolutions have no bias (a bias before BatchNorm is cancelled by the batch mean in training);
- VGG's classifier has no Dropout (its random masks cannot match another library's), so its
  Linear layers are classifier.0, .2 and .4; its input is the flattened last feature map
  (512 x (input_size/32)^2 values, no adaptive 7x7 pooling).
"""
from __future__ import annotations

import math

import numpy as np

from lazytensor.nn.layers import (BatchNorm2d, Conv2d, Flatten, GlobalAvgPool, Linear, MaxPool2d, ReLU,
                                  Sequential)
from lazytensor.nn.module import Module, parameter
from lazytensor.ops.elementwise import relu

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def _kaiming_fan_out(conv: Conv2d, rng) -> None:
    k, r, s, _ = conv.weight.shape
    std = math.sqrt(2.0 / (k * r * s))
    conv.weight[...] = parameter(rng.standard_normal(conv.weight.shape) * std, conv.weight.dtype, conv.weight.device)


def _conv(c_in, c_out, k, stride, padding, dtype, device, rng) -> Conv2d:
    conv = Conv2d(c_in, c_out, k, stride, padding, bias=False, dtype=dtype, device=device, rng=rng)
    _kaiming_fan_out(conv, rng)
    return conv


class VGG(Module):
    def __init__(self, config=VGG16, num_classes=10, input_size=32, dtype=np.float32, device=None, seed=0):
        rng = np.random.default_rng(seed)
        layers, c = [], 3
        for v in config:
            if v == "M":
                layers.append(MaxPool2d(2, 2))
                continue
            layers += [_conv(c, v, 3, 1, 1, dtype, device, rng), BatchNorm2d(v, device=device), ReLU()]
            c = v
        self.features = Sequential(*layers)
        side = input_size // 2 ** config.count("M")
        if side < 1:
            raise ValueError(f"VGG: input_size {input_size} is too small for {config.count('M')} poolings")
        self.flatten = Flatten()
        linears = [Linear(c * side * side, 4096, dtype=dtype, device=device, rng=rng, nchw_input=(c, side, side)),
                   ReLU(), Linear(4096, 4096, dtype=dtype, device=device, rng=rng), ReLU(),
                   Linear(4096, num_classes, dtype=dtype, device=device, rng=rng)]
        for layer in linears[::2]:
            layer.weight[...] = parameter(rng.standard_normal(layer.weight.shape) * 0.01, dtype, layer.weight.device)
            layer.bias[...] = 0
        self.classifier = Sequential(*linears)

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


class BasicBlock(Module):
    expansion = 1

    def __init__(self, c_in, planes, stride=1, dtype=np.float32, device=None, rng=None):
        self.conv1 = _conv(c_in, planes, 3, stride, 1, dtype, device, rng)
        self.bn1 = BatchNorm2d(planes, device=device)
        self.conv2 = _conv(planes, planes, 3, 1, 1, dtype, device, rng)
        self.bn2 = BatchNorm2d(planes, device=device)
        self.downsample = _downsample(c_in, planes, stride, dtype, device, rng)

    def forward(self, x):
        skip = x if self.downsample is None else self.downsample(x)
        y = relu(self.bn1(self.conv1(x)))
        return relu(self.bn2(self.conv2(y)) + skip)


class Bottleneck(Module):
    expansion = 4

    def __init__(self, c_in, planes, stride=1, dtype=np.float32, device=None, rng=None):
        width = planes
        self.conv1 = _conv(c_in, width, 1, 1, 0, dtype, device, rng)
        self.bn1 = BatchNorm2d(width, device=device)
        self.conv2 = _conv(width, width, 3, stride, 1, dtype, device, rng)   # torchvision's v1.5: stride here
        self.bn2 = BatchNorm2d(width, device=device)
        self.conv3 = _conv(width, planes * 4, 1, 1, 0, dtype, device, rng)
        self.bn3 = BatchNorm2d(planes * 4, device=device)
        self.downsample = _downsample(c_in, planes * 4, stride, dtype, device, rng)

    def forward(self, x):
        skip = x if self.downsample is None else self.downsample(x)
        y = relu(self.bn1(self.conv1(x)))
        y = relu(self.bn2(self.conv2(y)))
        return relu(self.bn3(self.conv3(y)) + skip)


def _downsample(c_in, c_out, stride, dtype, device, rng):
    if stride == 1 and c_in == c_out:
        return None
    return Sequential(_conv(c_in, c_out, 1, stride, 0, dtype, device, rng), BatchNorm2d(c_out, device=device))


class ResNet(Module):
    def __init__(self, block, counts, num_classes=1000, dtype=np.float32, device=None, seed=0):
        rng = np.random.default_rng(seed)
        self.conv1 = _conv(3, 64, 7, 2, 3, dtype, device, rng)
        self.bn1 = BatchNorm2d(64, device=device)
        self.maxpool = MaxPool2d(3, 2, 1)
        c = 64
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), counts)):
            blocks = []
            for j in range(n):
                blocks.append(block(c, planes, 2 if (j == 0 and i > 0) else 1, dtype, device, rng))
                c = planes * block.expansion
            setattr(self, f"layer{i + 1}", Sequential(*blocks))
        self.pool = GlobalAvgPool()
        self.fc = Linear(c, num_classes, dtype=dtype, device=device, rng=rng)

    def forward(self, x):
        x = self.maxpool(relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(self.pool(x))


def vgg16_bn(num_classes=10, input_size=32, dtype=np.float32, device=None, seed=0) -> VGG:
    return VGG(VGG16, num_classes, input_size, dtype, device, seed)


def resnet18(num_classes=1000, dtype=np.float32, device=None, seed=0) -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes, dtype, device, seed)


def resnet50(num_classes=1000, dtype=np.float32, device=None, seed=0) -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes, dtype, device, seed)
