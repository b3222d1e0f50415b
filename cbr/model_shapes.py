"""The conv layers of the models the experience tables are measured for, as ConvKeys.

ResNet-50 (torchvision layout, stride on the 3x3 conv, 224x224 input): every conv of its 16
bottlenecks, the downsample 1x1 included; the 7x7 stem (3 in-channels) is not a bottleneck conv.
VGG16-BN: its 13 3x3 convs, the first of which has 3 in-channels (cuDNN's fused engines may refuse
it: the table records that too).
"""

from __future__ import annotations

from typing import NamedTuple

from .conv_key import ConvKey


class ModelConv(NamedTuple):
    name: str
    key: ConvKey


def conv(name, n, hw, c, k, rs, stride=1, padding=0, dtype="float16") -> ModelConv:
    return ModelConv(name, ConvKey.of((n, hw, hw, c), (k, rs, rs, c), dtype, stride, padding, 1))


def resnet50_convs(batch: int = 128, dtype: str = "float16") -> list[ModelConv]:
    convs = []
    in_ch, hw = 64, 56  # after the stem and the max-pool
    for stage, (width, blocks, first_stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)), start=1):
        out_ch = width * 4
        for b in range(blocks):
            stride = first_stride if b == 0 else 1
            prefix = f"layer{stage}.{b}"
            out_hw = hw // stride
            convs.append(conv(f"{prefix}.conv1", batch, hw, in_ch, width, 1, dtype=dtype))
            convs.append(conv(f"{prefix}.conv2", batch, hw, width, width, 3, stride, 1, dtype=dtype))
            convs.append(conv(f"{prefix}.conv3", batch, out_hw, width, out_ch, 1, dtype=dtype))
            if b == 0:
                convs.append(conv(f"{prefix}.downsample", batch, hw, in_ch, out_ch, 1, stride, dtype=dtype))
            in_ch, hw = out_ch, out_hw
    return convs


def vgg16_convs(batch: int = 64, dtype: str = "float16") -> list[ModelConv]:
    convs = []
    in_ch, hw = 3, 224
    for block, (width, layers) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)), start=1):
        for i in range(layers):
            convs.append(conv(f"block{block}.conv{i + 1}", batch, hw, in_ch, width, 3, 1, 1, dtype=dtype))
            in_ch = width
        hw //= 2  # the max-pool after each block
    return convs


MODELS = {
    "resnet50": (resnet50_convs, 128),
    "vgg16": (vgg16_convs, 64),
}


def distinct_shapes(convs: list[ModelConv]) -> list[tuple[ConvKey, list[str]]]:
    """Each distinct ConvKey once, in first-use order, with the layers that share it."""
    seen: dict[ConvKey, list[str]] = {}
    for c in convs:
        seen.setdefault(c.key, []).append(c.name)
    return list(seen.items())
