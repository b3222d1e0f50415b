"""The fenced code blocks of a Markdown page, with the marker comment written just above each.

The docs' convention (docs/index.md, "Code blocks"):
- a ```python block runs; the blocks of one page run top to bottom in one interpreter;
- `<!-- output -->` above a ```text block: the printed output of the python block before it,
  where `...` stands for any text (a kernel's name, a time, a cache state);
- `<!-- skip: why -->` above any block: it does not run here (a GPU, a long training run, a
  shell command that installs), and the reason says why;
- any other block is an error, so that no example goes untested by oversight.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>```+)(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>output|skip)\s*(?::\s*(?P<why>.*?))?\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int            # 1-based line of the opening fence
    lang: str
    text: str
    marker: str | None   # "output", "skip" or None
    why: str | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip() == fence and lines[j].startswith(" " * indent)):
            line = lines[j]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            j += 1
        if j == len(lines):
            raise ValueError(f"{page}:{i + 1}: a code block that is never closed")
        k = i - 1
        while k >= 0 and lines[k].strip() == "":
            k -= 1
        marker = MARKER.match(lines[k]) if k >= 0 else None
        found.append(Block(page, i + 1, m["lang"], "\n".join(body) + "\n",
                           marker["kind"] if marker else None, marker["why"] if marker else None))
        i = j + 1
    return found


def output_matches(expected: str, actual: str) -> bool:
    """`actual` is `expected` where each `...` stands for any text; trailing spaces and blank lines at the ends ignored."""
    def norm(s: str) -> str:
        return "\n".join(line.rstrip() for line in s.strip("\n").split("\n"))
    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(actual), re.DOTALL) is not None
