"""The registry of the command line's verbs: name -> (module, class, summary), as pip's commands_dict.

One small module per verb in this package; each defines a Command (base.py). autograder/cli.py builds the
parser from this registry and dispatches; nothing else knows the verbs.
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

from autograder.commands.base import Command


class CommandInfo(NamedTuple):
    """Where a verb's Command lives (module and class, imported only when the verb runs) and its one-line summary for
    --help."""
    module_path: str
    class_name: str
    summary: str


commands_dict: dict[str, CommandInfo] = {
    "build": CommandInfo("autograder.commands.build", "BuildCommand",
                         "source notebook -> assignments/<name>/ and release/<name>/, reference recorded"),
    "record": CommandInfo("autograder.commands.record", "RecordCommand",
                          "record the reference of a built release in this environment (for a release built elsewhere)"),
    "grade": CommandInfo("autograder.commands.grade", "GradeCommand", "grade submitted notebooks"),
    "verify": CommandInfo("autograder.commands.verify", "VerifyCommand",
                          "reference gets full marks, stubs get 0, the corpus grades as declared, nothing leaks"),
    "check": CommandInfo("autograder.commands.check", "CheckCommand",
                         "run a notebook's public checks (the test cells a student can read)"),
    "export": CommandInfo("autograder.commands.export", "ExportCommand",
                          "package an assignment for Gradescope or an nbgrader course"),
    "nbgrader-grade": CommandInfo("autograder.commands.nbgrader_grade", "NbgraderGradeCommand",
                                  "grade an nbgrader course's submitted/ tree into its gradebook"),
    "report": CommandInfo("autograder.commands.report", "ReportCommand",
                          "HTML feedback per submission and a class report from grading results"),
    "new": CommandInfo("autograder.commands.new", "NewCommand",
                       "a working assignment to start from: solutions/<name>/ (one part, a public and a hidden "
                       "check, a corpus), which builds and verifies"),
    "import": CommandInfo("autograder.commands.import_", "ImportCommand",
                          "an nbgrader or otter assignment as solutions/<name>/, with a report of what could not "
                          "be converted"),
    "rubric": CommandInfo("autograder.commands.rubric", "RubricCommand",
                          "GPU accuracy rubric: grade saved models, merge the points into results"),
    "review": CommandInfo("autograder.commands.review", "ReviewCommand",
                          "grade written answers by hand on a local web page, merge the grades into results"),
    "similarity": CommandInfo("autograder.commands.similarity", "SimilarityCommand",
                              "similar submissions, per part: code and written answers, a report for the instructor"),
}


def create_command(name: str) -> Command:
    """The Command registered under `name` (KeyError if none)."""
    info = commands_dict[name]
    command_class = getattr(importlib.import_module(info.module_path), info.class_name)
    command = command_class()
    command.name, command.summary = name, info.summary
    return command
