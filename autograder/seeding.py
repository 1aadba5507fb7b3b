"""Seeding torch's random generators before every check, in the judge and in the workers."""
from __future__ import annotations

import functools

import torch


@functools.cache
def _gpu() -> bool:
    return torch.cuda.is_available()


def seed_torch(seed: int) -> None:
    """torch.manual_seed(seed). Without a GPU, only the CPU generator is seeded: torch.manual_seed also queues a
    seeding of every device backend not started yet (CUDA, XPU, MTIA), formatting a stack trace for each, a
    millisecond per call, and a grading run seeds thousands of times. The CPU generator's stream is the same."""
    if _gpu():
        torch.manual_seed(seed)  # the GPUs' generators too, now or when CUDA starts
    else:
        torch.default_generator.manual_seed(seed)
