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

from .errors import InputError

PR_SET_PDEATHSIG = 1  # linux/prctl.h
MAX_THREADS = 1024  # more than any machine has cores, few enough for every count to be a C int and a thread pool


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
    """OMP_NUM_THREADS where the environment sets it (torchrun sets 1 for several processes a machine),
    read as OpenMP reads it: a comma-separated list of thread counts, one per level of nested
    parallelism, whose first is this process's (torch takes that one too). A value OpenMP would not
    take, which libgomp ignores with a warning, or a count above MAX_THREADS (which torch's kernels
    do not survive) is an InputError: the user's setting is obeyed or refused, never passed over."""
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not omp:
        return None
    counts = [part.strip() for part in omp.split(",")]
    if not all(part.isascii() and part.isdigit() and int(part) > 0 for part in counts):
        raise InputError(
            f"OMP_NUM_THREADS={omp}: not a thread count (OpenMP takes whole numbers above 0, one per "
            "nesting level, separated by commas); set it so, or unset it"
        )
    if int(counts[0]) > MAX_THREADS:
        raise InputError(
            f"OMP_NUM_THREADS={omp}: {int(counts[0]):,} threads, more than the {MAX_THREADS:,} gptkit runs"
        )
    return int(counts[0])


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


def _start_worker(parent: int, initializer: Callable[..., object] | None, initargs: tuple[object, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    if initializer is not None:
        initializer(*initargs)


def _die_with(parent: int) -> None:
    """Linux kills this process when its parent dies (prctl PR_SET_PDEATHSIG); elsewhere a
    thread checks once a second that the parent is still there."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
