"""Forked worker processes for pure-Python work over many independent items (spec files, manifest entries).

Forked workers inherit the imported modules and compiled schema validators: no second start-up, unlike the spawned
workers the build needs once torch or onnxruntime are loaded (:mod:`generator.building.pipeline`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import multiprocessing
import os
from collections.abc import Iterator

__all__ = ["fork_pool", "usable_cpus"]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS tells, else the CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def fork_pool(jobs: int) -> Iterator[concurrent.futures.ProcessPoolExecutor | None]:
    """A pool of ``jobs`` forked workers, shut down on leaving; None where none can be made (work in-process then).

    While it lives, the objects that existed before it are frozen out of the cyclic collector (``gc.freeze``, as
    Python's gc docs advise before a fork): their memory pages stay shared with the workers. They are unfrozen on
    leaving. The workers run without the cyclic collector: they live only as long as the pool, the work they do
    makes few reference cycles, and the collector's passes over everything they build cost up to a fifth of their
    time (bench/bench_cli.py).
    """
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    gc.freeze()
    try:
        try:
            pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=gc.disable)
        except (OSError, NotImplementedError):  # no process semaphores here (a sandbox without /dev/shm)
            yield None
            return
        with pool:
            yield pool
    finally:
        gc.unfreeze()
