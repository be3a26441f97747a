"""Worker processes for the CPU-bound stages."""
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def process_pool(workers, initializer=None, initargs=()):
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
