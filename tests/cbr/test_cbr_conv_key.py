"""ConvKey (the cache and table key) and the model conv lists the tuner walks."""

import pytest

from lazytensor.cbr.conv_cpu import conv_output_shape
from lazytensor.cbr.conv_key import ConvKey
from lazytensor.cbr.model_shapes import distinct_shapes, resnet50_convs, vgg16_convs


def test_key_normalises_and_round_trips():
    key = ConvKey.of((8, 30, 20, 16), (32, 3, 5, 16), "float16", stride=(2, 1), padding=1, dilation=(1, 2))
    assert key.stride == (2, 1) and key.padding == (1, 1) and key.dilation == (1, 2)
    assert key.out_shape == conv_output_shape((8, 30, 20, 16), (32, 3, 5, 16), (2, 1), 1, (1, 2))
    text = key.table_key()
    assert text == "n8_h30_w20_c16_k32_r3_s5_float16_st2x1_pad1x1_dil1x2"
    assert ConvKey.from_table_key(text) == key
    assert ConvKey.of((8, 30, 20, 16), (32, 3, 5, 16), "float16", (2, 1), (1, 1), (1, 2)) == key
    assert hash(key) == hash(ConvKey.from_table_key(text))


def test_key_checks_like_conv2d():
    with pytest.raises(ValueError, match="x has 16 channels but w expects 8"):
        ConvKey.of((1, 4, 4, 16), (8, 1, 1, 8), "float16")
    with pytest.raises(ValueError, match="not a conv shape key"):
        ConvKey.from_table_key("n1_h2")


def test_resnet50_bottleneck_convs():
    convs = resnet50_convs(batch=32)
    assert len(convs) == 16 * 3 + 4  # three convs per bottleneck and one downsample per stage
    shapes = distinct_shapes(convs)
    assert len(shapes) == 22
    by_name = {c.name: c.key for c in convs}
    assert by_name["layer1.0.conv2"] == ConvKey.of((32, 56, 56, 64), (64, 3, 3, 64), "float16", 1, 1)
    assert by_name["layer3.3.conv2"] == ConvKey.of((32, 14, 14, 256), (256, 3, 3, 256), "float16", 1, 1)
    assert by_name["layer4.0.downsample"].out_shape == (32, 7, 7, 2048)
    assert by_name["layer4.2.conv3"].out_shape == (32, 7, 7, 2048)


def test_vgg16_convs():
    convs = vgg16_convs(batch=64)
    assert len(convs) == 13
    assert len(distinct_shapes(convs)) == 9
    assert convs[1].key == ConvKey.of((64, 224, 224, 64), (64, 3, 3, 64), "float16", 1, 1)
    assert convs[-1].key.out_shape == (64, 14, 14, 512)
