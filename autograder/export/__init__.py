"""Exports to the platforms where courses grade: Gradescope (gradescope.py) and nbgrader (nbgrader.py).

`autograder export gradescope <name>` and `autograder export nbgrader <name>`; see docs/platforms.md.
"""
