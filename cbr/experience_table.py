"""Experience tables: the measured best cuDNN plans per conv shape, for one (GPU, cuDNN version).

Design: docs/design/cbr.md, section "cbr/experience_table.py".
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

TABLES_DIR = Path(__file__).with_name("tables")
FORMAT = 1
RANKS = ("winner", "backup1", "backup2")


class ExperienceTableWarning(RuntimeWarning):
    """An experience table, or an entry of one, could not be read: the plan comes from elsewhere."""


def device_slug(gpu_name: str, cudnn_version: int) -> str:
    """File-name stem for one (GPU, cuDNN): 'NVIDIA H200', 91900 -> 'nvidia-h200__cudnn91900'."""
    gpu = re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "unknown-gpu"
    return f"{gpu}__cudnn{int(cudnn_version)}"


def key_text(key) -> str:
    return key if isinstance(key, str) else key.table_key()


def kind_text(kind) -> str:
    return getattr(kind, "value", kind)


def make_entry(plan_count: int, timings, failures: dict[str, str], truncated: bool = False) -> dict:
    """A table entry from PlanTiming-like records (index, name, median_ms, workspace_bytes), any order."""
    ranked = sorted(timings, key=lambda t: t.median_ms)
    entry: dict = {"plan_count": int(plan_count), "timed": len(ranked)}
    for rank, t in zip(RANKS, ranked):
        entry[rank] = {
            "name": t.name,
            "index": int(t.index),
            "median_ms": round(float(t.median_ms), 5),
            "workspace_bytes": int(t.workspace_bytes),
        }
    if ranked:
        first = min(ranked, key=lambda t: t.index)  # what cuDNN's heuristics alone would have run
        entry["heuristic_choice"] = {"name": first.name, "index": int(first.index), "median_ms": round(float(first.median_ms), 5)}
    entry["workspace_bytes"] = int(ranked[0].workspace_bytes) if ranked else 0
    entry["times_ms"] = {t.name: round(float(t.median_ms), 5) for t in ranked}
    if failures:
        entry["failed"] = dict(failures)
    if truncated:
        entry["truncated"] = True
    return entry


def rejected_entry(reason: str) -> dict:
    return {"rejected": reason}


class ExperienceTable:
    def __init__(self, gpu_name: str, cudnn_version: int, shapes: dict | None = None, meta: dict | None = None):
        self.gpu_name = gpu_name
        self.cudnn_version = int(cudnn_version)
        self.shapes: dict[str, dict[str, dict]] = shapes if shapes is not None else {}
        self.meta: dict = meta if meta is not None else {}
        self.files: dict[str, str] = {}         # table key -> the file its entries came from (messages)
        self.unreadable: dict[str, str] = {}    # file left out -> why

    # ---- lookup and record ---------------------------------------------------------------------
    def entry_problem(self, kind, key) -> tuple[dict | None, str | None]:
        """(the entry for kind and key, or None; why it cannot be read, or None)."""
        kinds = self.shapes.get(key_text(key))
        if kinds is None:
            return None, None
        if not isinstance(kinds, dict):
            return None, f"the shape's record is a {type(kinds).__name__}, not an object"
        entry = kinds.get(kind_text(kind))
        if entry is None:
            return None, None
        if not isinstance(entry, dict):
            return None, f"the entry is a {type(entry).__name__}, not an object"
        rejected = entry.get("rejected")
        if rejected is not None and not isinstance(rejected, str):
            return None, "its 'rejected' reason is not a text"
        return entry, None

    def lookup(self, kind, key) -> dict | None:
        return self.entry_problem(kind, key)[0]

    def ranked_plans(self, kind, key) -> list[tuple[str, str | None]]:
        """[(rank, plan name)] for winner, backup1, backup2 as recorded, in the order to try them; the
        name is None where that rank's record cannot be read."""
        entry = self.lookup(kind, key) or {}
        ranked = []
        for rank in RANKS:
            if rank in entry:
                plan = entry[rank]
                name = plan.get("name") if isinstance(plan, dict) else None
                ranked.append((rank, name if isinstance(name, str) and name else None))
        return ranked

    def plan_names(self, kind, key) -> list[str]:
        """Winner, backup1, backup2 (those recorded and readable), the order in which to try them."""
        return [name for _, name in self.ranked_plans(kind, key) if name is not None]

    def rejection(self, kind, key) -> str | None:
        return (self.lookup(kind, key) or {}).get("rejected")

    def file_of(self, key) -> str:
        return self.files.get(key_text(key), "an experience table given in memory")

    def record(self, kind, key, entry: dict) -> None:
        self.shapes.setdefault(key_text(key), {})[kind_text(kind)] = entry

    def merge(self, other: "ExperienceTable", source: str | None = None) -> None:
        for key, kinds in other.shapes.items():
            if source is not None:
                self.files[key] = source
            if not isinstance(kinds, dict) or not isinstance(self.shapes.get(key, {}), dict):
                self.shapes[key] = kinds        # kept as it is: entry_problem reports it when used
                continue
            for kind, entry in kinds.items():
                self.record(kind, key, entry)
        self.files.update({k: v for k, v in other.files.items() if k not in self.files})
        self.unreadable.update(other.unreadable)

    def __len__(self) -> int:
        return len(self.shapes)

    # ---- files ---------------------------------------------------------------------------------
    def file_name(self, model: str | None = None) -> str:
        stem = device_slug(self.gpu_name, self.cudnn_version)
        return f"{stem}__{model}.json" if model else f"{stem}.json"

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "gpu": self.gpu_name,
            "cudnn_version": self.cudnn_version,
            "meta": self.meta,
            "shapes": self.shapes,
        }

    def save(self, path) -> Path:
        """Write atomically (a tuner cut off mid-write leaves the previous file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per writer: two tuners never share one
        try:
            tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_json(cls, data: dict) -> "ExperienceTable":
        if not isinstance(data, dict):
            raise ValueError(f"the file holds a {type(data).__name__}, not an object")
        if data.get("format") != FORMAT:
            raise ValueError(f"experience table format {data.get('format')!r} is not {FORMAT}")
        if not isinstance(data.get("gpu"), str):
            raise ValueError("its 'gpu' is missing or not a text")
        shapes = data.get("shapes", {})
        if not isinstance(shapes, dict):
            raise ValueError(f"its 'shapes' is a {type(shapes).__name__}, not an object")
        return cls(data["gpu"], data["cudnn_version"], dict(shapes), dict(data.get("meta", {})))

    @classmethod
    def load(cls, path) -> "ExperienceTable":
        try:
            return cls.from_json(json.loads(Path(path).read_bytes()))
        except (KeyError, ValueError, TypeError) as e:    # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ValueError(f"{path} is not a lazytensor experience table: {e}") from e

    @classmethod
    def for_device(cls, gpu_name: str, cudnn_version: int, directory=None) -> "ExperienceTable":
        """Every table of this (GPU, cuDNN) in `directory` (default cbr/tables/), merged; empty if none."""
        directory = Path(directory) if directory is not None else TABLES_DIR
        merged = cls(gpu_name, cudnn_version)
        stem = device_slug(gpu_name, cudnn_version)
        if directory.is_dir():
            for path in sorted(directory.glob(f"{stem}*.json")):
                try:
                    table = cls.load(path)
                    same = device_slug(table.gpu_name, table.cudnn_version) == stem
                except (OSError, ValueError) as e:
                    merged.unreadable[str(path)] = str(e.__cause__ or e)
                    warnings.warn(f"lazytensor cannot read the experience table {path} ({e.__cause__ or e}): it is "
                                  f"left out, and the shapes it held fall back to timing or cuDNN's heuristics",
                                  ExperienceTableWarning, stacklevel=2)
                    continue
                if same:
                    merged.merge(table, str(path))
        return merged
