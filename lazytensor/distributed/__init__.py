"""Data-parallel processes: the rank and world size the launcher set (mpiexec, or torchrun's
RANK/WORLD_SIZE/LOCAL_RANK), and collectives on tensors, over MPI for CPU tensors and NCCL for
CUDA ones. One process per GPU. `all_reduced(x)` is the lazy form, a node inside a plan.

Design: docs/design/distributed.md
"""
from lazytensor.distributed.collectives import all_gather, all_reduce, broadcast
from lazytensor.distributed.group import barrier, init, local_rank, rank, shard, world_size
from lazytensor.kernels.collectives import DEFAULT_TIMEOUT, CollectiveMismatch, timeout
from lazytensor.ops.collectives import all_reduced

__all__ = ["init", "rank", "world_size", "local_rank", "barrier", "shard", "all_reduce", "broadcast", "all_gather",
           "all_reduced", "CollectiveMismatch", "timeout", "DEFAULT_TIMEOUT"]
