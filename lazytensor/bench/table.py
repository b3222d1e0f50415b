"""The table every benchmark prints: each case with its peers and the floor."""
from __future__ import annotations


class Table:
    """Rows of (case, implementation, seconds); ratios against the case's floor and baseline."""

    def __init__(self, title: str, baseline: str):
        self.title = title
        self.baseline = baseline
        self.rows: list = []          # (case, impl, seconds)
        self.floors: dict = {}        # case -> (seconds, how it was derived)
        self.notes: list = []

    def add(self, case: str, impl: str, seconds: float):
        self.rows.append((case, impl, seconds))

    def floor(self, case: str, seconds: float, how: str):
        self.floors[case] = (seconds, how)

    def to_pandas(self):
        """The rows as a pandas DataFrame: case, implementation, seconds, x_floor (time over the
        case's floor, NaN without one) and speedup (over the baseline, NaN without one). pandas is
        an optional extra: pip install 'lazytensor[notebooks]'."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Table.to_pandas needs pandas: pip install 'lazytensor[notebooks]' "
                              "(or pip install pandas)") from exc
        nan = float("nan")
        base = {c: s for c, i, s in self.rows if i == self.baseline}
        return pd.DataFrame(
            [(case, impl, s, s / self.floors[case][0] if case in self.floors else nan,
              base[case] / s if case in base else nan) for case, impl, s in self.rows],
            columns=["case", "implementation", "seconds", "x_floor", "speedup"])

    def render(self) -> str:
        out = [self.title, ""]
        header = f"| case | implementation | time | x floor | speed-up vs {self.baseline} |"
        out += [header, "|---|---|---:|---:|---:|"]
        base = {c: s for c, i, s in self.rows if i == self.baseline}
        for case, impl, s in self.rows:
            floor = self.floors.get(case)
            xf = f"{s / floor[0]:.2f}" if floor else "-"
            sp = f"{base[case] / s:.2f}x" if case in base else "-"
            out.append(f"| {case} | {impl} | {_fmt(s)} | {xf} | {sp} |")
        if self.floors:
            out.append("")
            for case, (s, how) in self.floors.items():
                out.append(f"floor of {case}: {_fmt(s)} ({how})")
        out += self.notes
        return "\n".join(out)


def _fmt(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"
