"""The torch release every install this project writes pins, in one place: the course's CI workflow
(.github/workflows/grade.yml, both jobs), `.ci/run`, README's commands and the Gradescope bundle
(autograder/export/gradescope.py) install `torch==TORCH_VERSION`; tests/test_workflow.py checks that each says it.

    python -m autograder.pins      prints it: pip install "torch==$(python -m autograder.pins)"

Standard library only, nothing else of the package: it runs where torch is not installed yet.
"""

TORCH_VERSION = "2.13.0"  # the CPU build on a grader without a GPU (PyTorch's CPU index), PyPI's build on a GPU machine

if __name__ == "__main__":
    print(TORCH_VERSION)
