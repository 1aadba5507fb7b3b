"""`autograder rubric <assignment> SUBMISSIONS... --out DIR`: the accuracy rubric for a batch of
submissions (on a GPU machine), merged into the results and grades.csv of an earlier `autograder grade`.

SUBMISSIONS are what `autograder grade` accepts (notebooks, folders of them, an unzipped Gradescope
export, an nbgrader exchange tree) and get the same ids. Each submission's checkpoint is the
assignment's file name (its rubric_check(checkpoint=...): bert_gru_sentiment.pt, bert_sentiment.pt) next to its
notebook, or CHECKPOINT_DIR/<submission id>/<file name> with --checkpoint-dir.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from autograder.deferred.accuracy.config import RubricConfig
from autograder.rubric.options import RubricCommandOptions
from autograder.files import write_atomic
from autograder.status import PENDING


class NoRubric(Exception):
    """The assignment cannot be loaded, or declares no rubric: nothing may be graded or merged."""


def assignment_rubric(assignment: str) -> tuple[RubricConfig, str | None, str | None, frozenset[str]]:
    """The assignment's rubric settings (from its hidden tests), its title, notebook name and the digests of its
    student notebook's code cells (so that the rubric picks the notebooks `autograder grade` picked). Raises
    NoRubric rather than guess: another assignment's settings would merge a wrong grade into the results."""
    from autograder.grading import resolve_release
    from autograder.deferred.accuracy.check import rubric_configs

    try:
        release = resolve_release(assignment)
    except Exception as exc:  # any reason the release cannot be had stops the command (re-raised)
        raise NoRubric(f"assignment {assignment!r} could not be loaded ({exc}). Give its name from the course "
                       f"folder (the one holding solutions/ or release/), or the path of its release or solutions "
                       f"folder") from exc
    configs = rubric_configs(release.checks)
    if not configs:
        raise NoRubric(f"{release.config.name} declares no rubric check (rubric_check in its hidden tests): there "
                       f"is no model accuracy to grade")
    if len(configs) > 1:
        print("warning: several rubric checks; grading the first", file=sys.stderr)
    return (replace(configs[0], assignment=release.config.name), release.config.title, release.config.notebook,
            release.student_code)


def existing_ids(out_dir: Path) -> dict[str, str]:
    """Resolved notebook path -> submission id, from the results of the earlier grading run."""
    ids = {}
    for path in sorted(out_dir.glob("*/grading.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            ids[str(Path(data["file"]).resolve())] = path.parent.name
        except (OSError, ValueError, KeyError):
            continue
    return ids


def _names_list(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def checkpoint_path(notebook: Path, sub_id: str, name: str, checkpoint_dir: Path | None) -> Path:
    """Where a submission's checkpoint file `name` is: under `checkpoint_dir`/<sub_id>/ where given, else beside its
    notebook."""
    if checkpoint_dir is not None:
        return checkpoint_dir / sub_id / name
    return notebook.parent / name


def run(opts: RubricCommandOptions) -> int:
    """`autograder rubric` with its options (built from the command line by autograder/commands/rubric.py)."""
    from autograder.grading import claim

    out = Path(opts.out)
    with claim(out):  # one command at a time in a results folder: a `grade` or `rubric` running there stops this one
        return _run(opts, out)


def _run(opts: RubricCommandOptions, out: Path) -> int:
    from autograder.grading import ClusterUnavailable, refresh_summary
    from autograder.rubric.stage import RubricRun
    from autograder.submissions import discover

    try:
        config, title, notebook_name, released = assignment_rubric(opts.assignment)
    except NoRubric as exc:
        print(f"error: {exc}; nothing was graded or changed", file=sys.stderr)
        return 2
    try:
        inputs = discover(opts.submissions, notebook_name, config.assignment, unpack_dir=None, released=released)
    except ValueError as exc:
        print(f"error: {exc} (unzip a Gradescope export first: the rubric needs the checkpoints beside the "
              f"notebooks)", file=sys.stderr)
        return 2
    for problem in inputs.problems:
        print(f"warning: {problem}", file=sys.stderr)
    options = opts.measure
    log = (lambda msg: None) if opts.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    run = None if opts.cluster else RubricRun(config, options, out_dir=out, log=log)
    known = existing_ids(out)
    notebooks = [s.path for s in inputs.submissions]
    ids = [known.get(str(s.path.resolve()), s.student) for s in inputs.submissions]
    ckpt_dir = opts.checkpoint_dir
    checkpoints = [checkpoint_path(nb, sub_id, config.checkpoint, ckpt_dir) for nb, sub_id in zip(notebooks, ids)]
    shared = sorted({str(c) for c in checkpoints if checkpoints.count(c) > 1})
    if shared:
        print(f"error: several submissions' notebooks lie in one folder, so their checkpoint would be the same file "
              f"({_names_list(shared)}); give each submission its own folder, or --checkpoint-dir DIR holding "
              f"DIR/<submission id>/{config.checkpoint}", file=sys.stderr)
        return 2
    jobs = [(str(nb), str(ckpt)) for nb, ckpt in zip(notebooks, checkpoints)]
    if opts.cluster:
        graded = _on_cluster(opts, config, options, out, jobs, log)
    else:
        graded = _here(opts, run, jobs)
    checks: list = [None] * len(jobs)
    try:
        for done, item in enumerate(graded, start=1):
            _record(out, ids[item.index], notebooks[item.index], item, title)
            checks[item.index] = item.outcome.check
            if not opts.quiet:
                _progress(done, len(notebooks), ids[item.index], item.outcome)
    except ClusterUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except _CannotPrepare as exc:
        print(f"error: the rubric could not load its encoder or data ({exc}); nothing more was changed. Check "
              f"--encoder / $BERT_ENCODER and --imdb / $IMDB_PATH (the hub is the default).", file=sys.stderr)
        return 2
    refresh_summary(out, title)
    print(f"rubric: {len(notebooks)} submission(s) merged into {out}/<submission>/results.json and {out / 'grades.csv'}")
    _into_gradebook(opts, config, notebook_name, notebooks, checks)
    return 0 if notebooks else 1


class _CannotPrepare(Exception):
    """The encoder or the data could not be loaded: nothing can be graded."""


def _here(opts: RubricCommandOptions, run, jobs: list[tuple[str, str]]):
    """Each submission's rubric on this machine, in order (`Graded` items, as the cluster yields them)."""
    from autograder.rubric.stage import Graded

    if run.pending:
        print(f"no CUDA on this machine: the rubric stays pending. On a machine with CUDA, with the results "
              f"folder and the submissions copied there, run:\n  autograder rubric {opts.assignment} "
              f"{' '.join(opts.submissions)} --out {opts.out}\n(or add --device cpu to grade on this CPU, slowly)",
              file=sys.stderr)
    if not run.pending and jobs:
        try:  # the encoder, the validation split and the cache: once, before any submission
            run.prepare()
        except Exception as exc:  # noqa: BLE001 - no encoder or data: nothing can be graded
            raise _CannotPrepare(f"{type(exc).__name__}: {exc}") from None
    for i, (nb, ckpt) in enumerate(jobs):
        start = time.monotonic()
        outcome = run.grade(Path(nb), Path(ckpt))
        outcome.details["wall_seconds"] = round(time.monotonic() - start, 3)
        yield Graded(i, outcome, run.encoder.source if run.encoder else None, dict(run.timings))


def _on_cluster(opts: RubricCommandOptions, config, options, out: Path, jobs: list[tuple[str, str]], log):
    from autograder.rubric.cluster import RubricPrepareError, grade_on_cluster

    try:
        yield from grade_on_cluster(opts.cluster, config, options, out, jobs, log)
    except RubricPrepareError as exc:
        raise _CannotPrepare(str(exc)) from None


def _record(out: Path, sub_id: str, notebook: Path, item, title: str | None) -> None:
    """Merge one submission's rubric into its results, with the details beside them (rubric.json), the check and
    the digests of the files measured included: a later `autograder grade` keeps it while they still match."""
    from autograder.grading import merge_check

    from autograder.deferred.accuracy.check import RUBRIC_FILE, measured_from

    merge_check(out, sub_id, item.outcome.check, title, str(notebook))
    checkpoint = Path(item.outcome.details.get("checkpoint", ""))
    details = {**item.outcome.details, "encoder": item.encoder, "timings": item.timings,
               "check": item.outcome.check.to_dict(), **measured_from(notebook, checkpoint)}
    write_atomic(out / sub_id / RUBRIC_FILE, json.dumps(details, indent=1, sort_keys=True, default=str))


def _progress(done: int, total: int, sub_id: str, outcome) -> None:
    c = outcome.check
    score = PENDING if c.status == PENDING else f"{c.score:g}/{c.max_score:g}"
    first = c.message.splitlines()[0] if c.message else ""
    first = first if len(first) <= 110 else first[:109].rstrip(" ,;") + "…"  # the whole message is in feedback.md
    print(f"[{done}/{total}] {sub_id}: rubric {score} ({c.seconds or 0:.1f} s) {first}", file=sys.stderr, flush=True)


def _into_gradebook(opts: RubricCommandOptions, config: RubricConfig, notebook_name: str | None, notebooks: list[Path],
                    checks: list) -> None:
    """In an nbgrader course (--course, or submissions from its submitted/ tree): the rubric's points into its
    gradebook too, where formgrader and `nbgrader export` read them."""
    from autograder.export.gradebook import course_of, scores_into_gradebook

    course = opts.course if opts.course else course_of(opts.submissions)
    if course is None or not notebook_name:
        return
    # nbgrader's tree: submitted/<student>/<assignment>/<notebook>
    by_student = {nb.parent.parent.name: [check] for nb, check in zip(notebooks, checks)}
    for line in scores_into_gradebook(course, config.assignment, notebook_name, by_student):
        print(f"gradebook: {line}")
