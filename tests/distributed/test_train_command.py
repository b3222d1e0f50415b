"""`python -m lazytensor train --nproc 2 --sync-bn` prints the losses of one process with BatchNorm2d."""
import re
import subprocess
import sys

from tests.distributed.launch import HERE, mpiexec


def _losses(*extra):
    mpiexec()
    done = subprocess.run([sys.executable, "-m", "lazytensor", "train", "--model", "small_vgg", "--device", "cpu",
                           "--batch", "16", "--steps", "5", "--print-losses", "--log-every", "1", *extra],
                          capture_output=True, text=True, timeout=300, cwd=HERE.parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("final loss") == 1      # rank 0 prints
    return [float(v) for v in re.findall(r"loss at step \d+: (\S+)", done.stdout)]


def test_nproc_2_sync_bn_equals_one_process():
    one, two = _losses("--nproc", "1"), _losses("--nproc", "2", "--sync-bn")
    assert len(one) == len(two) == 5
    for a, b in zip(one, two):
        assert abs(a - b) <= 1e-5 * abs(a)
