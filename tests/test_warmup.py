"""The fork server's library warm-ups (sandbox/warmup.py): they run library code once so that workers forked
afterwards skip its first-call costs, and leave nothing a worker could tell apart: the random states as they
were, no thread, no CUDA."""
import os
import subprocess
import sys

_PROGRAM = """
import os, random, threading
import numpy, torch
torch.set_num_threads(1)
import transformers
from transformers import BertModel  # (what the fork server's preload imports for a BERT assignment)
from autograder.sandbox import warmup

torch.manual_seed(5); random.seed(5); numpy.random.seed(5)
states = (torch.random.get_rng_state(), random.getstate(), numpy.random.get_state()[1].copy())
threads = len(os.listdir("/proc/self/task"))
ran = warmup.warm_libraries()
again = warmup.warm_libraries()
same = (torch.equal(states[0], torch.random.get_rng_state()) and states[1] == random.getstate()
        and bool((states[2] == numpy.random.get_state()[1]).all()))
print(sorted(ran), again, same, len(os.listdir("/proc/self/task")) - threads, torch.cuda.is_initialized())
"""


def test_warm_ups_run_once_and_leave_random_states_threads_and_cuda_alone():
    out = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout.split()
    assert out == ["['torch',", "'transformers']", "[]", "True", "0", "False"]


def test_a_failing_warm_up_is_skipped():
    code = ("import torch\nfrom autograder.sandbox import warmup\n"
            "warmup._torch = lambda: 1 / 0\nprint(warmup.warm_libraries())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
