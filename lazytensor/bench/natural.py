"""`python -m lazytensor bench --suite natural`: natural NumPy code, as a new user writes it.

The `small` rows: single items and small slices of a 4,096-element float32 CPU tensor (`t[3] = 0.5`,
`t[0:1] = 0.5`, `t[...] = 0.5`, `float(t[3])`, scikit-learn's `m[i, i] = v`, a row read `m[i]`,
`t[3] += 1`), each against the same statement on a NumPy array in the same run, with the target:
at most 10x NumPy's time. Then the plain training loop (lazytensor.bench.natural_loop).
"""
from __future__ import annotations

import numpy as np

import lazytensor as lt
from lazytensor.bench.table import Table
from lazytensor.kernels.timing import time_host


def _small_cases():
    """(case, lazytensor's statement, NumPy's) over a 4,096-element vector and a 64x64 matrix."""
    t = lt.asarray(np.zeros(4096, np.float32), device="cpu")
    a = np.zeros(4096, np.float32)
    m = lt.asarray(np.zeros((64, 64), np.float32), device="cpu")
    am = np.zeros((64, 64), np.float32)

    def item_add(x):
        x[3] += 1

    return [
        ("t[3] = 0.5", lambda: t.__setitem__(3, 0.5), lambda: a.__setitem__(3, 0.5)),
        ("t[0:1] = 0.5", lambda: t.__setitem__(slice(0, 1), 0.5), lambda: a.__setitem__(slice(0, 1), 0.5)),
        ("t[...] = 0.5", lambda: t.__setitem__(Ellipsis, 0.5), lambda: a.__setitem__(Ellipsis, 0.5)),
        ("float(t[3])", lambda: float(t[3]), lambda: float(a[3])),
        ("t[3].item()", lambda: t[3].item(), lambda: a[3].item()),
        ("m[5, 5] = 0.5", lambda: m.__setitem__((5, 5), 0.5), lambda: am.__setitem__((5, 5), 0.5)),
        ("m[5] (a row)", lambda: m[5], lambda: am[5]),
        ("t[3] += 1", lambda: item_add(t), lambda: item_add(a)),
    ]


def run_natural_bench(print_fn=print, device: str = "cpu") -> None:
    table = Table("natural code: small reads and writes, 4,096 float32 (and 64x64), CPU", "NumPy")
    lines = []
    for case, lt_call, np_call in _small_cases():
        t_lt = time_host(lt_call, repeat=7, number=2000)
        t_np = time_host(np_call, repeat=7, number=2000)
        table.add(case, "lazytensor", t_lt)
        table.add(case, "NumPy", t_np)
        ratio = t_lt / t_np
        lines.append(f"  {case}: {ratio:.1f}x NumPy's time, target at most 10x "
                     f"({'pass' if ratio <= 10 else 'MISS'})")
    if device != "cpu":
        table.notes.append("(the small rows run on the CPU whatever the device: a CUDA tensor's item is a host sync)")
    print_fn(table.render())
    from lazytensor.bench import natural_loop
    lines += natural_loop.run(print_fn, device)
    print_fn("targets:")
    for line in lines:
        print_fn(line)
