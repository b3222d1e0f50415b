"""The identity of one convolution problem: what a cuDNN graph, its plan and a table row are keyed by."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .conv_args import validate_conv_args

KEY_PATTERN = re.compile(
    r"n(\d+)_h(\d+)_w(\d+)_c(\d+)_k(\d+)_r(\d+)_s(\d+)_(\w+?)_st(\d+)x(\d+)_pad(\d+)x(\d+)_dil(\d+)x(\d+)$"
)


@dataclass(frozen=True)
class ConvKey:
    """Shapes (x: N,H,W,C; w: K,R,S,C), element dtype name, the (h, w) stride/padding/dilation, and
    for float32 whether TF32 engines may run (a graph built without them is another graph)."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    dtype: str
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    tf32: bool = False

    @classmethod
    def of(cls, x_shape, w_shape, dtype, stride=1, padding=0, dilation=1, tf32=False) -> "ConvKey":
        """Checked constructor (same errors as conv2d); tf32 counts for float32 only."""
        checked = validate_conv_args(x_shape, w_shape, dtype, dtype, stride, padding, dilation)
        n, h, w, c = (int(d) for d in x_shape)
        k, r, s, _ = (int(d) for d in w_shape)
        name = np.dtype(dtype).name
        return cls(n, h, w, c, k, r, s, name, checked.stride, checked.padding, checked.dilation,
                   bool(tf32) and name == "float32")

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.h, self.w, self.c)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        return (self.k, self.r, self.s, self.c)

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        p = (self.h + 2 * ph - dh * (self.r - 1) - 1) // sh + 1
        q = (self.w + 2 * pw - dw * (self.s - 1) - 1) // sw + 1
        return (self.n, p, q, self.k)

    def table_key(self) -> str:
        """The string the experience tables use, e.g. n128_h56_w56_c64_k64_r3_s3_float16_st1x1_pad1x1_dil1x1
        (float32 with TF32 engines allowed: ..._float32_tf32_st...)."""
        return (
            f"n{self.n}_h{self.h}_w{self.w}_c{self.c}_k{self.k}_r{self.r}_s{self.s}_{self.dtype}"
            f"{'_tf32' if self.tf32 else ''}"
            f"_st{self.stride[0]}x{self.stride[1]}_pad{self.padding[0]}x{self.padding[1]}"
            f"_dil{self.dilation[0]}x{self.dilation[1]}"
        )

    @classmethod
    def from_table_key(cls, text: str) -> "ConvKey":
        m = KEY_PATTERN.match(text)
        if m is None:
            raise ValueError(f"not a conv shape key: {text!r} (expected e.g. {EXAMPLE_KEY})")
        g = m.groups()
        ints = [int(v) for v in g[:7]]
        rest = [int(v) for v in g[8:]]
        dtype, tf32 = (g[7][: -len("_tf32")], True) if g[7].endswith("_tf32") else (g[7], False)
        return cls(*ints, dtype, (rest[0], rest[1]), (rest[2], rest[3]), (rest[4], rest[5]), tf32)

    def __str__(self) -> str:
        return self.table_key()


EXAMPLE_KEY = "n128_h56_w56_c64_k64_r3_s3_float16_st1x1_pad1x1_dil1x1"
