"""Exports to the platforms where courses grade: Gradescope (`gradescope`) and nbgrader (`nbgrader`).

`autograder export gradescope <name>` and `autograder export nbgrader <name>`; see docs/platforms.md.
"""
from __future__ import annotations


def add_parser(sub) -> None:
    from autograder.export import gradescope, nbgrader

    e = sub.add_parser("export", help="package an assignment for Gradescope or an nbgrader course")
    targets = e.add_subparsers(dest="target", required=True)
    gradescope.add_parser(targets)
    nbgrader.add_parser(targets)
    nbgrader.add_grade_parser(sub)
