"""numba's registries are set up by one thread at a time: a background compile and a kernel load on
the caller's thread both set them up, and two at once failed with "generator already executing"
(seen in a notebook's lt.explain while the first kernel compiled). Each case runs in a fresh
process, where the registries are not set up yet, with a thread switch every microsecond so the
threads interleave inside numba's loaders."""
from __future__ import annotations

import subprocess
import sys

CODE = r'''
import sys, threading
import numba
from lazytensor.kernels.cpu.numba_import import set_up_registries
sys.setswitchinterval(1e-6)
errors = []
start = threading.Barrier(4)

def set_up():
    start.wait()
    try:
        set_up_registries()
    except Exception as e:      # (the failure under test)
        errors.append(repr(e))

def compile_one():
    start.wait()
    try:
        numba.njit(lambda a: a + 1)(1.0)
    except Exception as e:
        errors.append(repr(e))

threads = [threading.Thread(target=f) for f in (set_up, set_up, set_up, compile_one)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
'''


def test_threads_set_up_numba_registries_at_once():
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]", done.stdout
