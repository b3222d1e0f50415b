"""Every code block of README.md and docs/**/*.md runs as written, top to bottom per page, in the
default mode: without LAZYTENSOR_JIT_WAIT (which tests/conftest.py sets for the suite), so first
calls run in the interpreter tier as a reader's would. Printed output is checked where a page
shows it (tests/docs/markdown_blocks.py has the convention)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown_blocks import blocks, output_matches

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
RUNNABLE = "python"
PAGE_TIMEOUT_S = 120


def ids(pages):
    return [str(p.relative_to(ROOT)) for p in pages]


@pytest.mark.parametrize("page", PAGES, ids=ids(PAGES))
def test_every_block_runs_or_says_why_not(page):
    """A block is python (it runs), output (checked) or skipped with a reason: nothing untested by oversight."""
    found = blocks(page)
    for block in found:
        if block.marker == "skip":
            assert block.why, f"{block.where}: <!-- skip: ... --> needs the reason"
        elif block.marker == "output":
            assert block.lang == "text", f"{block.where}: an output block is fenced as ```text"
        else:
            assert block.lang == RUNNABLE, (f"{block.where}: a ```{block.lang} block neither runs nor says why "
                                            f"(<!-- skip: why --> above it, or <!-- output --> for printed output)")
    for before, block in zip(found, found[1:]):
        if block.marker == "output":
            assert before.lang == RUNNABLE and before.marker is None, \
                f"{block.where}: an output block follows the python block that prints it"


def page_env(cache_dir: Path) -> dict:
    env = dict(os.environ)
    env.pop("LAZYTENSOR_JIT_WAIT", None)           # the default mode: first calls in the interpreter tier
    env["LAZYTENSOR_DEVICE"] = "cpu"               # the pages' printed output is the CPU's
    env["LAZYTENSOR_CACHE_DIR"] = str(cache_dir)
    return env


RUN_PAGES = [p for p in PAGES if any(b.lang == RUNNABLE and b.marker is None for b in blocks(p))]


@pytest.mark.parametrize("page", RUN_PAGES, ids=ids(RUN_PAGES))
def test_page_runs_and_prints_what_it_shows(page, tmp_path_factory):
    found = blocks(page)
    runnable = [b for b in found if b.lang == RUNNABLE and b.marker is None]
    work = tmp_path_factory.mktemp("page")
    sources = work / "blocks.json"
    sources.write_text(json.dumps([b.text for b in runnable]))
    cache = tmp_path_factory.getbasetemp() / "lazytensor-cache"
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("run_page.py")), str(sources)],
                          cwd=work, env=page_env(cache), capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    assert done.returncode == 0, f"{page.name}: a block raised\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    outputs = dict(zip((b.line for b in runnable), json.loads(done.stdout.strip().split("\n")[-1])))
    for before, block in zip(found, found[1:]):
        if block.marker == "output":
            actual = outputs[before.line]
            assert output_matches(block.text, actual), \
                f"{block.where}: the block at line {before.line} printed\n{actual}\nnot what the page shows:\n{block.text}"
