"""Mutation analysis: how many wrong programs made from the reference do the hidden tests let through?

`autograder verify NAME --mutants` makes mutants of the answer key, part by part, and grades them with the
corpus, in the same batch and the same confined workers as any submission:

1. What is graded (analysis.graded_definitions): every top-level def and class of a solution cell with lines
   inside its solution regions; its part is the part of the checks that use it (a test cell naming it, a
   hidden check reading `sub.NAME` or calling a worker helper that reads it) when they are all in one part,
   else the part the markdown heading above it names, else the part of the first test cell after it in the
   source notebook (each when that part's checks use it or none do), else the first part whose checks use it
   (autograder/notebook/parts.py). Only the lines a student writes are mutated.
2. Mutants (operators.py, which says why `ast` and which operators): one mistake each, in one definition;
   the mutant is the answer key with that definition replaced (corpus.make_notebook). Ids are stable and the
   order is the text's; `--mutants-limit N` grades a seeded sample of N per part that takes every operator in
   turn.
3. Killed: the mutant loses points on a check that the answer key passes, of its part or of another part
   whose checks use its definition. Survived: it does not.
   A mutant the grader could not grade at all is "not graded" and not counted.
4. Survivors get two probes:
   - the equivalence probe (probe.py), graded in a second batch: the mutant and the reference, the reference
     run in a forked child on every call the checks make (its side effects die with the child), the worker
     ending (exit code 86) at the first difference of results, in-place effects, exceptions or gradients;
   - the reach probe, graded in a third batch for the survivors that answered every call as the reference (a
     difference shows the mutated code ran): the reference with a call that ends the worker (exit code 87)
     run just before the mutated code (wrapping the mutated expression, or as a statement before the mutated
     statement), one per place: does any check run that code?
   The probes are graded in this process (one job) with no check's `depends_on`, so that no second run with
   the reference standing in for the probed definition hides what the first run saw. A survivor the checks
   run, whose every call answers as the reference's and whose probe loses no point the mutant kept, is
   "probably equivalent" and not counted; every other survivor stays one, with a note: the checks never run
   it, it answers a call of check X differently, the probe could not compare a call, or the probe changed
   what a check saw.
5. The score of a part: killed / (killed + survived). The report lists every survivor with its diff.
"""
from autograder.mutants.analysis import (EQUIVALENT, KILLED, NOT_GRADED, SURVIVED, Definition, Mutant,
                                         MutationReport, Outcome, PartScore, classify, graded_definitions,
                                         mutant_notebooks, plan, probe_notebooks, reach_notebooks, report,
                                         settle_reach, settle_same, without_substitution)
from autograder.mutants.operators import OPERATORS, Mutation, mutations

__all__ = ["EQUIVALENT", "KILLED", "NOT_GRADED", "OPERATORS", "SURVIVED", "Definition", "Mutant", "Mutation",
           "MutationReport", "Outcome", "PartScore", "classify", "graded_definitions", "mutant_notebooks",
           "mutations", "plan", "probe_notebooks", "reach_notebooks", "report", "settle_reach", "settle_same",
           "without_substitution"]
