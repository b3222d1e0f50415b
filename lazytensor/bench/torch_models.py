"""The peers' networks in PyTorch, built to the structures of lazytensor's (lt.nn.vgg16_bn,
lt.nn.resnet18, lt.nn.resnet50, small_vgg), so the training benchmark times the same work on both
sides: VGG's convolutions without bias and its classifier without Dropout, ResNet-18 as torchvision's
(BasicBlock), ResNet-50 as torchvision's v1.5.
Written out here so the benchmark needs torch alone, not torchvision. Imported only where torch is.
"""
from __future__ import annotations

from lazytensor.nn.models import VGG16


def _conv_bn_relu(nn, c_in, c_out):
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


def vgg(torch, config, num_classes: int, input_size: int):
    nn = torch.nn
    layers, c = [], 3
    for v in config:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += _conv_bn_relu(nn, c, v)
            c = v
    side = input_size // 2 ** config.count("M")
    return nn.Sequential(*layers, nn.Flatten(),
                         nn.Linear(c * side * side, 4096), nn.ReLU(inplace=True),
                         nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, num_classes))


def vgg16_bn(torch, num_classes: int, input_size: int):
    return vgg(torch, VGG16, num_classes, input_size)


def small_vgg(torch, num_classes: int, widths=(16, 32)):
    nn = torch.nn
    layers, c = [], 3
    for w in widths:
        layers += _conv_bn_relu(nn, c, w) + [nn.MaxPool2d(2, 2)]
        c = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))


def resnet18(torch, num_classes: int):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, c_in, planes, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c_in, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
                nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes))
            self.downsample = None
            if stride != 1 or c_in != planes:
                self.downsample = nn.Sequential(nn.Conv2d(c_in, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

        def forward(self, x):
            skip = x if self.downsample is None else self.downsample(x)
            return torch.relu(self.body(x) + skip)

    return _resnet(torch, BasicBlock, (2, 2, 2, 2), 1, num_classes)


def resnet50(torch, num_classes: int):
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, c_in, planes, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c_in, planes, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
                nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
                nn.Conv2d(planes, planes * 4, 1, bias=False), nn.BatchNorm2d(planes * 4))
            self.downsample = None
            if stride != 1 or c_in != planes * 4:
                self.downsample = nn.Sequential(nn.Conv2d(c_in, planes * 4, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes * 4))

        def forward(self, x):
            skip = x if self.downsample is None else self.downsample(x)
            return torch.relu(self.body(x) + skip)

    return _resnet(torch, Bottleneck, (3, 4, 6, 3), 4, num_classes)


def _resnet(torch, block, counts, expansion: int, num_classes: int):
    """torchvision's stem (7x7 stride-2 conv, BN, ReLU, 3x3 stride-2 max pooling), the four stages of
    `block`, global average pooling and the fc layer."""
    nn = torch.nn
    layers, c = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                 nn.MaxPool2d(3, 2, 1)], 64
    for i, (planes, n) in enumerate(zip((64, 128, 256, 512), counts)):
        for j in range(n):
            layers.append(block(c, planes, 2 if (j == 0 and i > 0) else 1))
            c = planes * expansion
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))


def build(torch, name: str, px: int, num_classes: int):
    if name == "vgg16bn":
        return vgg16_bn(torch, num_classes, px)
    if name == "resnet18":
        return resnet18(torch, num_classes)
    if name == "resnet50":
        return resnet50(torch, num_classes)
    if name == "small_vgg":
        return small_vgg(torch, num_classes)
    raise ValueError(f"no PyTorch peer for model {name!r}")
