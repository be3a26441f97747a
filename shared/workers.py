"""Worker processes for the CPU-bound stages, and how many cores they have."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def physical_cores() -> int:
    """The physical cores this process may run on (logical CPUs that are hyper-threads of one
    core count once)."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores: set[tuple[str, str] | int] = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topology / "physical_package_id").read_text(), (topology / "core_id").read_text()))
        except OSError:  # no sysfs (not Linux): each logical CPU counts
            cores.add(cpu)
    return max(1, len(cores))


def threads_from_environment() -> int | None:
    """OMP_NUM_THREADS where the environment sets it (torchrun sets 1 for several processes a machine)."""
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return int(omp) if omp.isdigit() and int(omp) > 0 else None


def cores_per_process() -> int:
    """The physical cores of this process's share: torchrun's processes on this machine share them."""
    return max(1, physical_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def default_threads() -> int:
    """Threads (or worker processes) of a CPU-bound stage: OMP_NUM_THREADS where the environment
    sets it, else one per physical core of this process's share."""
    return threads_from_environment() or cores_per_process()


def process_pool(
    workers: int, initializer: Callable[..., object] | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A pool of `workers` forked processes that leave Ctrl-C to the parent and die with it.

    Forking hands each worker the parent's objects (a tokenizer and its caches) without
    pickling them. Workers ignore SIGINT so that an interrupt ends the run once, in the
    parent, instead of printing a traceback from every worker. A parent killed outright
    (kill -9, the OOM killer) cannot shut its pool down, so each worker ends itself when
    its parent is gone rather than living on, reparented to init.
    """
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(), initializer, initargs),
    )


def _start_worker(parent, initializer, initargs):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    if initializer is not None:
        initializer(*initargs)


def _die_with(parent):
    """Linux kills this process when its parent dies (prctl PR_SET_PDEATHSIG); elsewhere a
    thread checks once a second that the parent is still there."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):

        def watch():
            while os.getppid() == parent:
                time.sleep(1)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
