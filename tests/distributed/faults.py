"""Run under mpiexec by tests/distributed/test_faults.py: argv[1] says which fault."""
import os
import signal
import sys
import time

import numpy as np

import lazytensor as lt
from lazytensor import distributed as dist

r, n = dist.init()
fault = sys.argv[1]
if fault == "kill" and r == 1:
    os.kill(os.getpid(), signal.SIGKILL)
if fault == "stuck" and r == 1:
    time.sleep(60)
shape = (3,) if fault != "shape" or r == 0 else (4,)
dtype = np.float32 if fault != "dtype" or r == 0 else np.float64
t = lt.asarray(np.ones(shape, dtype))
try:
    dist.all_reduce(t)
except dist.CollectiveMismatch as e:
    print("MISMATCH:", e, flush=True)
    sys.exit(3)
print("done", flush=True)
