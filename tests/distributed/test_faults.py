"""A rank that dies or never joins a collective ends the job with a clear error within the
timeout; mismatched shapes or dtypes raise an error naming both."""
import time

from tests.distributed.launch import HERE, run


def test_killed_rank_ends_every_rank():
    start = time.monotonic()
    done = run(2, [HERE / "faults.py", "kill"], timeout=120, env={"LAZYTENSOR_DIST_TIMEOUT": "10"})
    assert done.returncode != 0
    assert "BAD TERMINATION" in done.stdout + done.stderr    # mpiexec ends the others at once
    assert time.monotonic() - start < 60


def test_stuck_collective_aborts_within_the_timeout():
    start = time.monotonic()
    done = run(2, [HERE / "faults.py", "stuck"], timeout=120, env={"LAZYTENSOR_DIST_TIMEOUT": "3"})
    assert done.returncode != 0
    assert "did not complete within 3 s (LAZYTENSOR_DIST_TIMEOUT)" in done.stderr, (done.stdout + done.stderr)[-3000:]
    assert time.monotonic() - start < 50


def test_shape_and_dtype_mismatch_name_both():
    for fault, mine, theirs in (("shape", "(3,)", "(4,)"), ("dtype", "float32", "float64")):
        done = run(2, [HERE / "faults.py", fault], timeout=120)
        assert done.returncode == 3, done.stderr[-2000:]
        assert "MISMATCH:" in done.stdout and mine in done.stdout and theirs in done.stdout
