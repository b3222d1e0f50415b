"""init(), rank(), world_size(), barrier() and shard(): this process's place in the job."""
from __future__ import annotations

from lazytensor.kernels.collectives import group


def init():
    """Join the job the launcher started (mpiexec; torchrun's environment variables are read too)
    and return (rank, world_size). Safe to call more than once; the collectives call it themselves."""
    g = group()
    return g.rank, g.size


def rank() -> int:
    return group().rank


def world_size() -> int:
    return group().size


def local_rank() -> int:
    """The rank among the processes of this host: the GPU this process uses."""
    return group().local_rank


def barrier() -> None:
    """Wait until every rank reaches this call (or abort the job after the timeout)."""
    group().barrier()


def shard(x, axis: int = 0):
    """This rank's contiguous part of the global batch `x` along `axis`: rank r of n takes rows
    [r*m, (r+1)*m), m = len // n. The length must divide by the world size (every rank runs the same
    shapes, so the gradients' mean is the whole batch's)."""
    g = group()
    length = x.shape[axis]
    if length % g.size:
        raise ValueError(f"lazytensor.distributed.shard: the batch of {length} does not divide among {g.size} ranks; "
                         f"make the global batch a multiple of the world size")
    m = length // g.size
    index = (slice(None),) * axis + (slice(g.rank * m, (g.rank + 1) * m),)
    return x[index]
