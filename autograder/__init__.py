"""Autograding for deep-learning notebook courses. The import package is `autograder`; the distribution on
PyPI is `torchgrade` (pip install torchgrade; `autograder` there is another project)."""

DISTRIBUTION = "torchgrade"
