"""A progress bar on long work (tuning, benchmark suites, training) where tqdm is installed, an
optional extra; without it, or when stderr is not a terminal, the loop runs as it is and the output
stays plain text."""
from __future__ import annotations


def progress(items, desc: str, unit: str = "it", total: int | None = None):
    """`items`, iterated under a tqdm bar on stderr (shown on a terminal only: disable=None)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, unit=unit, total=total, disable=None, leave=False)
