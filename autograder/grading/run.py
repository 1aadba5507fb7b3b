"""A grading run: `autograder grade <name> SUBMISSIONS... --out DIR` as a function, `grade()`.

Submissions are graded by `jobs` grading processes side by side (grading/pool.py), or in this process with
--jobs 1 (grading/grader.py); every submission still gets its own worker process. Results are written as each
submission finishes (grades.csv at most once a second while the run goes on: rewriting a table of every row
after each of thousands of submissions would cost more than grading some of them; always at the end, and when the
run is stopped halfway: Ctrl-C, SIGTERM, SIGHUP or a full disk leave tables listing every result the folder holds,
and no staged copy), so an interrupted run loses nothing: running again skips submissions already graded from
the same notebook and the same release (grading/resume.py; `regrade` grades them again). Scores and messages
do not depend on the order, on the batch, or on `jobs` (see docs/isolation.md for what is and is not
deterministic).
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import torch

from autograder.deferred import merge_into, read_back
from autograder.files import write_atomic
from autograder.grading.resume import (
    MARKER, apart_from_earlier, graded_by_another_version, previous, release_fingerprint, restore_derived,
    submission_fingerprint,
)
from autograder.grading.grader import Grader, error_result, imported_modules, recorded_modules, ungraded_result
from autograder.grading.options import GradeOptions
from autograder.grading.outdir import OutDirLost, claim, ensure_held, results_in
from autograder.grading.pool import Pool
from autograder.grading.preflight import preflight
from autograder.grading.progress import Progress
from autograder.grading.staging import NotStaged, Staging
from autograder.release import Release
from autograder.reports.class_statistics import class_statistics, format_mean
from autograder.reports.results import SubmissionResult, write_submission
from autograder.reports.summary import write_summary
from autograder.reports.table import write_grades
from autograder.sandbox import level_of, preload_modules, run_memory_groups
from autograder.submissions import Submission, submission_ids


def _why_not_graded(result: SubmissionResult) -> str:
    """The submission's error, else what its checks were not graded for (the reference failing each of them)."""
    if result.error:
        return result.error.removeprefix("not graded: ")
    causes = sorted({c.grader_problem for c in result.ungraded if c.grader_problem})
    more = f" (and {len(causes) - 3} more causes)" if len(causes) > 3 else ""
    return "; ".join(causes[:3]) + more if causes else "none of its checks could be graded here"


def report_grader_problems(results: list[SubmissionResult]) -> None:
    """On stderr, whatever `quiet` says: submissions the grader could not grade at all (a grading process that
    died, a notebook this machine may not read), then checks that no submission could be graded on here, and why."""
    whole = [r for r in results if r.ungraded and len(r.ungraded) == len(r.checks)]
    lines = [f"GRADER PROBLEM: {len(whole)} submission(s) not graded at all (marked NOT GRADED, never 0; their grades "
             "are not final):"] if whole else []
    lines += [f"  - {r.submission}: {_why_not_graded(r)}" for r in whole]
    causes: dict[str, set[str]] = {}
    for r in results:
        for c in r.ungraded if r not in whole else []:
            causes.setdefault(c.name, set()).add(c.grader_problem)
    if causes:
        affected = sum(1 for r in results if r.ungraded and r not in whole)
        lines.append(f"GRADER PROBLEM: {len(causes)} check(s) could not be graded here (the reference does not pass "
                     f"them in this environment, or the machine failed the worker running them), so {affected} "
                     "submission(s) were not graded on them (marked NOT GRADED, never 0; their grades are not final):")
        lines += [f"  - {name}: {'; '.join(sorted(why))}" for name, why in sorted(causes.items())]
    if not lines:
        return
    lines.append("Fix the cause (a module missing, a broken install, a file the reference needs, a machine short of "
                 "memory, a file this user may not read), then run the same command again: it grades again only the "
                 "submissions NOT GRADED.")
    print("\n".join(lines), file=sys.stderr, flush=True)


def _ids_and_notes(submissions: list, paths: list[Path], options: GradeOptions) -> tuple[list[str], dict]:
    """One id per submission (given, the students' of `Submission`s, or from the file names), and the notes."""
    if options.ids is not None:
        ids = list(options.ids)
    else:
        if submissions and all(isinstance(s, Submission) for s in submissions):
            named, by_file = [s.student for s in submissions], [s.named_by_file for s in submissions]
        else:
            named, by_file = submission_ids(paths), [True] * len(paths)
        ids, moved = apart_from_earlier(options.out_dir, paths, named, by_file)
        for i, (path, before, after) in enumerate(zip(paths, named, ids)):
            if i in moved:  # whatever `quiet` says: a row under another name than the file's is news
                print(f"{path}: graded as {after}: {options.out_dir / before} holds something else (the result of another "
                      "file, or files that are no result)",
                      file=sys.stderr, flush=True)
    if len(set(ids)) != len(ids):
        raise ValueError("submission ids must be unique")
    notes = dict(options.notes)
    for s, sub_id in zip(submissions, ids):
        if isinstance(s, Submission) and s.note:
            notes.setdefault(sub_id, s.note)
    return ids, notes


GRADES_EVERY_SECONDS = 1.0  # how often grades.csv is rewritten while a run goes on


class Run:
    """The results of one grading run, written into its folder as each submission finishes."""

    def __init__(self, release: Release, options: GradeOptions, paths: list[Path], ids: list[str], notes: dict,
                 staging: Staging, submissions: list | None = None):
        self.release, self.options, self.out, self.notes = release, options, options.out_dir, notes
        self.names = [c.name for c in release.checks]
        release_id = release_fingerprint(release)
        self.given = list(paths)  # the paths as given, which results name
        self.staging = staging
        self.prints = [submission_fingerprint(path, release_id) for path in paths]  # the bytes as they are now
        self.results: list[SubmissionResult | None] = [None] * len(paths)
        # results of earlier commands in the same folder: the tables list them too
        this_run = set(ids)
        self.earlier = {k: v for k, v in results_in(self.out).items() if k not in this_run}
        self.todo = []
        self.other_version = 0  # results of another version of the grader, graded again (resume.py)
        given = [s if isinstance(s, Submission) else Submission("", p) for s, p in zip(submissions or paths, paths)]
        self.unstaged: dict[int, NotStaged] = {}  # found in a folder, not there as found now: rows saying why
        for i, (path, sub_id) in enumerate(zip(paths, ids)):
            earlier = None if options.regrade else previous(self.out, sub_id, self.prints[i])
            if earlier is not None:
                restore_derived(self.out, earlier, release.config.title)  # a feedback.md removed, say
                self.results[i] = earlier
                continue
            self.other_version += not options.regrade and graded_by_another_version(self.out, sub_id, self.prints[i])
            if given[i].refused:  # not graded at all: nothing of it is read (a link out is not followed to copy it)
                self.todo.append((i, path, sub_id))
                continue
            # graded from a copy, whatever the original does meanwhile (only those graded: a disk that filled up
            # is not filled again by copies of what an earlier command graded)
            try:
                staged, digest = self.staging.stage(path, given[i].found_at)
            except NotStaged as exc:
                self.unstaged[i] = exc
                staged, digest = path, f"not staged: {exc}"  # never resumed: graded again by the next run
            self.prints[i] = submission_fingerprint(path, release_id, digest)
            self.todo.append((i, staged, sub_id))
        self.jobs = max(1, min(options.jobs, len(self.todo)))
        self.grades_written = 0.0  # when grades.csv was last written (finish)
        self.status = ""  # the workers' confinement status line
        self.memory = ""  # what holds the workers' memory (a line for the summary)
        self.progress = Progress(len(paths), len(paths) - len(self.todo), self.jobs, options.quiet, options.progress)

    def finish(self, i: int, result: SubmissionResult) -> None:
        """Take submission `i`'s result: write it (and its fingerprint, so a later run can keep it) into its folder,
        the grade table now and then, and the progress line. Stops, writing nothing, where the results folder is no
        longer this command's."""
        ensure_held(self.out)  # DIR removed or replaced under this command: stop, write nothing into another's folder
        result.file = str(self.given[i])  # not the staged copy it was graded from
        note = self.notes.get(result.submission)
        if note and note not in result.notes and note != result.error:
            result.notes.insert(0, note)
        self._keep_deferred(i, result)
        if self.options.settle is not None:
            self.options.settle(result)
        write_submission(self.out, result, self.release.config.title)
        write_atomic(self.out / result.submission / MARKER, json.dumps(self.prints[i], indent=1, sort_keys=True))
        self.results[i] = result
        if time.monotonic() - self.grades_written >= GRADES_EVERY_SECONDS:
            self.write_table()
        self.progress.update(result)

    def _keep_deferred(self, i: int, result: SubmissionResult) -> None:
        """What the deferred kinds' commands recorded in the submission's folder (the accuracy rubric, hand grades:
        autograder.deferred) goes into `result` while it was decided from the same files; otherwise those checks
        stay pending and the notes say that the earlier results were for other files."""
        found = read_back(self.out / result.submission, self.given[i], set(self.names))
        merge_into(result.checks, found)
        result.notes += [note for note in found.notes if note not in result.notes]

    def write_table(self) -> None:
        """grades.csv: every result the folder holds (OutDirLost where the folder is no longer this run's)."""
        ensure_held(self.out)
        write_grades(self.out, self.in_folder(), self.names)
        self.grades_written = time.monotonic()

    def write_tables_as_stopped(self) -> None:
        """A run stopped halfway (Ctrl-C, SIGTERM, SIGHUP, a full disk): grades.csv and the summary list every result
        the folder holds now, read again from it (one written the moment the signal came is a row too); nothing
        where it holds none (a run refused before grading anything writes no table)."""
        ensure_held(self.out)
        present = {**results_in(self.out), **{r.submission: r for r in self.in_folder()}}
        if not present:
            return
        every = [present[k] for k in sorted(present)]
        write_grades(self.out, every, self.names)
        if self.options.summary:
            write_summary(self.out, every, self.release.config.title, self._summary_lines(every))

    def done(self) -> list[SubmissionResult]:
        """This command's results, in the order given."""
        return [r for r in self.results if r is not None]

    def in_folder(self) -> list[SubmissionResult]:
        """Every result the folder holds: earlier commands' and this one's, by id."""
        merged = {**self.earlier, **{r.submission: r for r in self.done()}}
        return [merged[k] for k in sorted(merged)] if self.earlier else self.done()

    def refuse(self, refused: dict[int, str]) -> None:
        """Rows for submissions that are not graded at all (submissions.Submission.refused), and for those that
        could not be read as they were found (NotStaged: NOT GRADED where the machine is the cause)."""
        refused = {**refused, **{i: str(exc) for i, exc in self.unstaged.items()}}
        for i, path, sub_id in [t for t in self.todo if t[0] in refused]:
            row = ungraded_result if i in self.unstaged and self.unstaged[i].machine else error_result
            self.finish(i, row(self.release, path, sub_id, refused[i]))
        self.todo = [t for t in self.todo if t[0] not in refused]

    def grade_remaining(self) -> None:
        """Grade what is left: in this process (one job) or in a pool of grading processes."""
        if not self.todo:
            return
        if self.options.cluster:
            from autograder.grading.cluster import ClusterPool  # Ray is optional: imported only for --cluster

            pool: Pool | ClusterPool = ClusterPool(self.release, self.options, self.status, self.finish)
        elif self.jobs == 1:
            self._grade_in_this_process()
            return
        else:
            pool = Pool(self.release, self.options, self.status, self.finish)
        pool.run(self.todo)
        self.status = self.status or pool.status  # the preflight's line, as a worker would say it

    def _grade_in_this_process(self) -> None:
        """One Grader here (--jobs 1): the submissions left, one after another."""
        grader = Grader(self.release, self.options, self.status, self_grade=len(self.todo) > 1)
        try:
            for n, (i, path, sub_id) in enumerate(self.todo, start=1):
                self.finish(i, grader.grade_one(path, sub_id, more=n < len(self.todo)))
            self.status = grader.isolation_status
        finally:
            grader.close()

    def summarize(self) -> None:
        """summary.md and summary.csv, and a few lines on stderr (unless quiet)."""
        final, every = self.done(), self.in_folder()
        write_summary(self.out, every, self.release.config.title, self._summary_lines(every))
        if not self.options.quiet:
            print("\n".join(self._closing_lines(final)), file=sys.stderr, flush=True)

    def _summary_lines(self, every: list[SubmissionResult]) -> list[str]:
        extra = [isolation_line(every, self.status)] if any(r.confinement for r in every) or self.status else []
        return extra + ([f"Memory: {self.memory}."] if self.memory else [])

    def _closing_lines(self, final: list[SubmissionResult]) -> list[str]:
        progress, elapsed = self.progress, time.monotonic() - self.progress.start
        rate = f" ({progress.done / elapsed * 60:.1f}/min with {self.jobs} job(s))" if progress.done and elapsed > 0 else ""
        lines = [f"graded {progress.done} submission(s) in {elapsed:.1f} s{rate}; "
                 f"{progress.skipped} already graded; {progress.failed} could not be graded"]
        figures = class_statistics(final)
        if figures.graded:
            lines.append(f"mean score {format_mean(figures.mean)} / {figures.max_score:g}; per-check summary in "
                         f"{self.out / 'summary.md'}")
        return lines


def isolation_line(results: list[SubmissionResult], status: str) -> str:
    """How the workers of the results in a folder were confined, as each result records it (an earlier command's
    too); `status`, the preflight's line, where none records it."""
    seen: dict[str, int] = {}
    for r in results:
        if r.confinement:
            seen[r.confinement] = seen.get(r.confinement, 0) + 1
    if len(seen) <= 1:
        only = next(iter(seen), status)
        return f"Isolation: {level_of(only)} confinement ({only})."
    return "Isolation: " + "; ".join(f"{n} submission(s) with {level_of(s)} confinement ({s})"
                                     for s, n in sorted(seen.items(), key=lambda kv: -kv[1])) + "."


def grade(release: Release, submissions: list, options: GradeOptions) -> list[SubmissionResult]:
    """Grade `submissions` (paths, or `Submission`s from autograder.submissions) into options.out_dir.
    Returns one result per submission, in the order given."""
    with claim(options.out_dir):
        return _grade_staged(release, submissions, options)


def _grade_staged(release: Release, submissions: list, options: GradeOptions) -> list[SubmissionResult]:
    """grade() in the claimed folder: each notebook staged (copied once), the copies removed however the run ends."""
    paths = [Path(s.path) if isinstance(s, Submission) else Path(s) for s in submissions]
    ids, notes = _ids_and_notes(submissions, paths, options)
    staging = Staging(options.out_dir, enabled=not options.cluster)
    try:  # the staged copies go whatever ends the run, staging itself included (a full disk, a signal)
        return _grade_and_write_tables(Run(release, options, paths, ids, notes, staging, submissions), release,
                                       submissions, options)
    finally:
        try:
            ensure_held(options.out_dir)
            staging.close()
        except OutDirLost:  # the folder's new owner stages its own copies there: leave them
            pass


def _grade_and_write_tables(run: Run, release: Release, submissions: list,
                            options: GradeOptions) -> list[SubmissionResult]:
    """Grade the run, then write grades table and summary (on an interruption: the tables of what was written)."""
    threads = torch.get_num_threads()
    try:
        _prepare_and_grade(run, release, submissions, options)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM, SIGHUP), out of disk...: the tables list every result written
        with contextlib.suppress(Exception):
            run.write_tables_as_stopped()
        raise
    finally:
        torch.set_num_threads(threads)
        run.progress.finish()
    final = run.done()
    run.write_table()
    report_grader_problems(final)
    if options.summary:
        run.summarize()
    return final


def _prepare_and_grade(run: Run, release: Release, submissions: list, options: GradeOptions) -> None:
    """Rows for refused submissions, the fork server's preload, the preflight, then what is left graded."""
    run.refuse({i: s.refused for i, s in enumerate(submissions) if isinstance(s, Submission) and s.refused})
    if run.todo and run.jobs == 1 and not options.cluster:  # the fork server imports what the workers will need while this process goes on
        preload_modules(recorded_modules(release) or imported_modules(release.reference.units), wait=False)
    run.status = preflight(release, options) if run.todo else ""
    if run.other_version:  # whatever `quiet` says: grades that change under the same notebooks are news
        print(f"{run.other_version} submission(s) in {options.out_dir} were graded by another version of autograder: "
              "graded again", file=sys.stderr, flush=True)
    if run.progress.skipped and not options.quiet:
        print(f"{run.progress.skipped} submission(s) already graded in {options.out_dir}: skipped (--regrade grades "
              "them again)", file=sys.stderr, flush=True)
    torch.set_num_threads(1)  # judge-side arithmetic alike in every grading process
    with run_memory_groups() as (_, run.memory):
        run.grade_remaining()
