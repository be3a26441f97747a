"""Worker processes for the CPU-bound stages."""
import multiprocessing
import signal
from concurrent.futures import ProcessPoolExecutor


def process_pool(workers, initializer=None, initargs=()):
    """A pool of `workers` forked processes that leave Ctrl-C to the parent.

    Forking hands each worker the parent's objects (a tokenizer and its caches) without
    pickling them. Workers ignore SIGINT so that an interrupt ends the run once, in the
    parent, instead of printing a traceback from every worker.
    """
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(initializer, initargs),
    )


def _start_worker(initializer, initargs):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
