"""vmrt on a Ray cluster (the optional `vmrt[ray]` extra; `import vmrt` never loads Ray).

    import ray, vmrt.ray
    ray.init()                                    # or RAY_ADDRESS=... for a cluster
    with vmrt.ray.ModulePool("model.vmfb", parameters="weights.irpa", num_actors=4) as pool:
        for y in pool.map("predict", batches):    # numpy in, numpy out, in input order
            ...

ModulePool (actors, faults, back-pressure) in vmrt.ray.pool; ModuleBatchFunction, a
module function for Ray Data's `map_batches`, in vmrt.ray.data.
"""

from __future__ import annotations

from vmrt.ray.data import ModuleBatchFunction
from vmrt.ray.pool import ModulePool, PoolCall, PoolStats
from vmrt.ray.worker import WorkerInfo

__all__ = ["ModuleBatchFunction", "ModulePool", "PoolCall", "PoolStats", "WorkerInfo"]
