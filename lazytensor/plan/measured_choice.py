"""MeasuredChoices: a choice between ways of running one step (the CBR stage 1, the dBN stage, one or
two streams for wgrad and dgrad), measured once per (GPU, shape) and kept in memory and in the disk
cache (a kernels.cache.ChoicesFile, checked when read, written atomically). LAZYTENSOR_CBR_TUNE=0
takes the untimed default instead of measuring."""
from __future__ import annotations

import functools
import os

from lazytensor.kernels.cache import ChoicesFile
from lazytensor.plan.planning_space import backed


class MeasuredChoices:
    def __init__(self, file_name: str, valid, untimed: tuple):
        self.memory: dict = {}
        self.disk = ChoicesFile(file_name, valid)
        self.untimed = untimed          # (choice, note) when LAZYTENSOR_CBR_TUNE=0

    def choose(self, key: str, measure) -> tuple:
        """(choice, note) for key: remembered, else from the disk cache, else measure() ->
        (choice, note, keep): keep=False leaves the result out of the disk cache (a choice forced
        by a failure, not by a measurement)."""
        hit = self.memory.get(key)
        if hit is not None:
            return hit
        disk = self.disk.get(key)
        if disk is not None:
            hit = self.memory[key] = (disk[0], disk[1] + ", from the disk cache")
            return hit
        if os.environ.get("LAZYTENSOR_CBR_TUNE", "1") == "0":
            hit = self.memory[key] = self.untimed
            return hit
        with backed(measure):           # a step planned over placeholders is measured over real memory
            choice, note, keep = measure()
        hit = self.memory[key] = (choice, note)
        if keep:
            self.disk.put(key, [choice, note])
        return hit


@functools.lru_cache(maxsize=None)
def device_name(device_id: int) -> str:
    """The GPU's name, part of every key (asking the driver costs about a millisecond: once per device)."""
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(device_id)["name"].decode()
