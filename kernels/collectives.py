"""The process group: collectives on arrays between the processes of one job, over MPI for host
arrays (mpi4py) and NCCL for CUDA arrays (CuPy's binding; the NCCL id broadcast over MPI).
Every collective is nonblocking and polled against a deadline: one that does not complete in
`timeout()` seconds prints which collective, on which rank, and aborts the whole job (MPI_Abort).
NCCL calls are enqueued on a stream and never waited for by the host, so a watchdog thread polls an
event recorded after them (after a CUDA graph holding them, too) against the same deadline.

Design: docs/design/distributed.md
"""
from __future__ import annotations

import collections
import os
import sys
import threading
import time

import numpy as np

OPS = ("sum", "mean", "max", "min", "prod")
DEFAULT_TIMEOUT = 300.0     # seconds; LAZYTENSOR_DIST_TIMEOUT overrides it


class CollectiveMismatch(ValueError):
    """Ranks called one collective with different shapes, dtypes or operations."""


def timeout() -> float:
    """Seconds a collective may take before the job is aborted (LAZYTENSOR_DIST_TIMEOUT)."""
    return float(os.environ.get("LAZYTENSOR_DIST_TIMEOUT", DEFAULT_TIMEOUT))


class Group:
    """The ranks of this job: `rank`, `size`, `local_rank`, and the collectives on arrays."""

    def __init__(self):
        self.mpi = _mpi_world()
        env_size = int(os.environ.get("WORLD_SIZE", "1"))
        if self.mpi is not None and self.mpi.size > 1:
            self.rank, self.size = self.mpi.rank, self.mpi.size
            local = os.environ.get("MPI_LOCALRANKID", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK"))
            self.local_rank = int(local) if local is not None else self.rank
            self.launcher = "mpiexec"
        else:
            self.rank, self.size = int(os.environ.get("RANK", "0")), env_size
            self.local_rank = int(os.environ.get("LOCAL_RANK", str(self.rank)))
            self.launcher = "torchrun" if "RANK" in os.environ and env_size > 1 else "single process"
        if self.size > 1 and (self.mpi is None or self.mpi.size != self.size):
            raise RuntimeError(f"lazytensor.distributed: the launcher says world size {self.size} (rank "
                               f"{self.rank}) but MPI sees {0 if self.mpi is None else self.mpi.size} processes: "
                               f"the collectives need MPI; launch with `mpiexec -n {self.size} python ...` "
                               f"(the `distributed` extra installs mpi4py and mpich)")
        self._nccl = None
        self._watched = collections.deque()     # (CUDA event, deadline, what), in stream order
        self._watchdog = None

    # -- host arrays over MPI --------------------------------------------------------------
    def all_reduce(self, a, op: str, what: str = "all_reduce") -> None:
        """`a` (a NumPy or CuPy array) replaced in place by the op of every rank's `a`."""
        if self.size == 1 and not _is_cuda(a):
            return
        if _is_cuda(a):
            self._nccl_all_reduce(a, op, what)
            return
        from mpi4py import MPI
        mpi_op = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]
        buf = a if a.flags.c_contiguous else np.ascontiguousarray(a)
        if buf.dtype == np.bool_:       # MPI has no bool sum: a logical or/and as max/min of bytes
            view = buf.view(np.uint8)
            mpi_op = MPI.MAX if op in ("sum", "max") else MPI.MIN
            self._wait(self.mpi.Iallreduce(MPI.IN_PLACE, view, op=mpi_op), what)
        else:
            self._wait(self.mpi.Iallreduce(MPI.IN_PLACE, buf, op=mpi_op), what)
            if op == "mean":
                buf /= self.size
        if buf is not a:
            a[...] = buf

    def broadcast(self, a, root: int, what: str = "broadcast") -> None:
        if self.size == 1:
            return
        if _is_cuda(a):
            self._nccl_broadcast(a, root, what)
            return
        buf = a if a.flags.c_contiguous else np.ascontiguousarray(a)
        self._wait(self.mpi.Ibcast(buf, root=root), what)
        if buf is not a:
            a[...] = buf

    def all_gather(self, a, out, what: str = "all_gather") -> None:
        """out[r] = rank r's `a`, for every rank r (out has shape (size,) + a.shape)."""
        if self.size == 1:
            out[0] = a
            return
        if _is_cuda(a):
            self._nccl_all_gather(a, out, what)
            return
        self._wait(self.mpi.Iallgather(np.ascontiguousarray(a), out), what)

    def barrier(self) -> None:
        if self.size > 1:
            self._wait(self.mpi.Ibarrier(), "barrier")

    def check_same(self, what: str, signature: str) -> None:
        """Raise CollectiveMismatch naming both when the ranks' `signature`s (shape, dtype, op) differ."""
        if self.size == 1:
            return
        from mpi4py import MPI
        text = signature.encode()[:256].ljust(256)
        mine = np.frombuffer(text, np.uint8).copy()
        every = np.empty((self.size, 256), np.uint8)
        self._wait(self.mpi.Iallgather(mine, every), f"{what} (checking shapes)")
        del MPI
        for r in range(self.size):
            theirs = every[r].tobytes().decode().rstrip()
            if theirs != signature:
                raise CollectiveMismatch(f"lazytensor.distributed.{what}: rank {self.rank} has {signature} but rank "
                                         f"{r} has {theirs}: every rank must call the same collective on the same "
                                         f"shape and dtype")

    def _wait(self, request, what: str) -> None:
        """Poll `request` until it completes or the deadline passes (then abort every rank)."""
        limit = timeout()
        deadline = time.monotonic() + limit
        pause = 0.0
        while not request.Test():
            if time.monotonic() > deadline:
                self.abort(f"{what} did not complete within {limit:g} s (LAZYTENSOR_DIST_TIMEOUT): a rank "
                           f"died, is stuck, or did not call the same collective")
            time.sleep(pause)
            pause = min(2 * pause + 1e-5, 1e-3)

    def abort(self, message: str) -> None:
        sys.stderr.flush()
        os.write(2, f"lazytensor.distributed: rank {self.rank} of {self.size}: {message}; aborting the job\n".encode())
        time.sleep(0.5)     # mpiexec forwards the line before MPI_Abort ends the job
        if self.mpi is not None:
            self.mpi.Abort(70)
        os._exit(70)

    # -- CUDA arrays over NCCL --------------------------------------------------------------
    def watch(self, what: str) -> None:
        """Note that the work enqueued so far on the current CUDA stream (NCCL calls among it) must
        complete within timeout(); the watchdog aborts the job if it does not. Nothing is recorded
        while the stream is being captured into a graph: the graph's launch is watched instead."""
        import cupy
        stream = cupy.cuda.get_current_stream()
        if stream.is_capturing():
            return
        event = cupy.cuda.Event(disable_timing=True)
        event.record(stream)
        self._watched.append((event, time.monotonic() + timeout(), what))
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch_loop, name="lazytensor NCCL watchdog", daemon=True)
            self._watchdog.start()

    def _watch_loop(self) -> None:
        watched = self._watched
        while True:
            while watched and watched[0][0].done:
                watched.popleft()
            if watched and time.monotonic() > watched[0][1]:
                what = watched[0][2]
                self.abort(f"{what} did not complete on the GPU within {timeout():g} s (LAZYTENSOR_DIST_TIMEOUT): "
                           f"a rank died, is stuck, or did not call the same collective")
            time.sleep(0.01 if watched else 0.05)


    def nccl(self):
        """The NCCL communicator of this job, made on first use: rank 0's unique id broadcast over MPI."""
        if self._nccl is None:
            from cupy.cuda import nccl
            uid = nccl.get_unique_id() if self.rank == 0 else None
            if self.size > 1:
                uid = self.mpi.bcast(uid, root=0)
            self._nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        return self._nccl

    def _nccl_all_reduce(self, a, op, what):
        import cupy
        from cupy.cuda import nccl
        comm = self.nccl()
        nop = {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN,
               "prod": nccl.NCCL_PROD}[op]
        if a.dtype == np.bool_:     # bytes: or as max, and as min
            nop = nccl.NCCL_MIN if op in ("min", "prod") else nccl.NCCL_MAX
        stream = cupy.cuda.get_current_stream()
        comm.allReduce(a.data.ptr, a.data.ptr, a.size, _nccl_dtype(a.dtype), nop, stream.ptr)
        if op == "mean" and self.size > 1:
            a /= self.size
        self.watch(what)

    def _nccl_broadcast(self, a, root, what):
        import cupy
        comm = self.nccl()
        comm.bcast(a.data.ptr, a.size, _nccl_dtype(a.dtype), root, cupy.cuda.get_current_stream().ptr)
        self.watch(what)

    def _nccl_all_gather(self, a, out, what):
        import cupy
        comm = self.nccl()
        comm.allGather(a.data.ptr, out.data.ptr, a.size, _nccl_dtype(a.dtype), cupy.cuda.get_current_stream().ptr)
        self.watch(what)


_group = None


def group() -> Group:
    """This process's group, made on first use (lazytensor.distributed.init)."""
    global _group
    if _group is None:
        _group = Group()
    return _group


def _mpi_world():
    """MPI's COMM_WORLD, or None where mpi4py is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        if "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ:
            raise RuntimeError("lazytensor.distributed: launched by mpiexec but mpi4py is not installed; "
                               "pip install 'lazytensor[distributed]'") from None
        return None
    return MPI.COMM_WORLD


def _is_cuda(a) -> bool:
    return not isinstance(a, np.ndarray)


def _nccl_dtype(dtype):
    from cupy.cuda import nccl
    table = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
             np.dtype(np.float16): nccl.NCCL_FLOAT16, np.dtype(np.int32): nccl.NCCL_INT32,
             np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.uint8): nccl.NCCL_UINT8,
             np.dtype(np.bool_): nccl.NCCL_UINT8, np.dtype(np.int8): nccl.NCCL_INT8}
    if hasattr(nccl, "NCCL_BFLOAT16"):
        from lazytensor.kernels.ops import BFLOAT16
        table[np.dtype(BFLOAT16)] = nccl.NCCL_BFLOAT16
    if np.dtype(dtype) not in table:
        raise TypeError(f"lazytensor.distributed: NCCL has no {np.dtype(dtype).name} reduction")
    return table[np.dtype(dtype)]
