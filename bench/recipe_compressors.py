"""bench/recipe.py's compressors: general-purpose compressors given the training text, the baseline
a model has to beat to have learned more than repeated strings. Each held-out bits per byte =
(compressed size of train + held out - compressed size of train) in bits / held-out bytes."""

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from bench.recipe_char import split_text

# Command lines that compress stdin to stdout. One thread each: xz 5.6+ and zstd may default to
# several, and xz then cuts its input into blocks compressed without each other's context.
COMPRESSORS = {
    "xz -9e": ["xz", "-9e", "-T1", "-c"],
    "bzip2 -9": ["bzip2", "-9", "-c"],
    "zstd -22 --long=27": ["zstd", "--ultra", "-22", "--long=27", "-T1", "-c", "-q"],
}


def run_compressors(path):
    """{compressor: held-out bits per byte given the training text} of those installed, and the
    held-out bytes they score."""
    train, held_out = (part.encode("utf-8") for part in split_text(path.read_text(encoding="utf-8")))
    installed = {name: cmd for name, cmd in COMPRESSORS.items() if shutil.which(cmd[0])}
    with ThreadPoolExecutor(os.cpu_count()) as pool:  # one single-threaded compressor a core at a time
        sizes = {
            name: [pool.submit(compressed_size, cmd, data) for data in (train + held_out, train)]
            for name, cmd in installed.items()
        }
        bpb = {name: 8 * (whole.result() - head.result()) / len(held_out) for name, (whole, head) in sizes.items()}
    return bpb, len(held_out)


def compressed_size(cmd, data):
    return len(subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout)


def missing_compressors():
    return [name for name, cmd in COMPRESSORS.items() if not shutil.which(cmd[0])]
