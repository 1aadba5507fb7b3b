"""nbgrader's gradebook: grade a course's submitted/<student>/<name>/ tree with this project and write the scores
into gradebook.db cell by cell (`autograder nbgrader-grade`), with feedback and late penalties as nbgrader's
autograde gives them; and later scores (the rubric's, hand grades) into the same gradebook. The course itself is
written by autograder/export/nbgrader.py (`autograder export nbgrader`), whose cell ids the scores go to."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path
from autograder.files import write_atomic
from autograder.status import FAILED, PENDING, UNGRADED, status_of
from autograder.notebook.markers import nbgrader_meta
from autograder.export.nbgrader import SETUP_ID, _source_dir, check_grade_ids, hand_grade_ids, hand_graded_ids


# -- grading nbgrader's submitted/ tree into its gradebook ----------------------------------------

CARRIED = ("timestamp.txt", "submission_secret.txt")  # what nbgrader keeps beside autograded notebooks and feedback


def nbgrader_config(course: Path):
    """The configuration nbgrader itself would read for this course: the user's and system's Jupyter config
    folders' nbgrader_config.py, then the course's (later wins, as in nbgrader)."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course)]:
        try:
            config.merge(PyFileConfigLoader("nbgrader_config.py", path=folder).load_config())
        except ConfigFileNotFound:
            continue
    return config


def grade_into_gradebook(assignment: str, course: Path, students: list[str] | None = None,
                         quiet: bool = False, trusted: bool = False) -> dict[str, float]:
    """Grade course/submitted/<student>/<name>/<notebook> with this project; write the scores into the course's
    gradebook, late penalties as nbgrader's AssignLatePenalties assigns them (the course's penalty_method or
    plugin), and feedback/<student>/<name>/<notebook>.html beside the files `nbgrader release_feedback` reads.
    Returns {student: score before any late penalty}."""
    import tempfile

    import nbformat
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.coursedir import CourseDirectory

    from autograder.grading import GradeOptions, grade, resolve_release
    from autograder.reports.html import submission_html
    from autograder.submissions import unique_ids

    course = Path(course).resolve()
    source = _source_dir(assignment, course)
    release = resolve_release(str(source))
    name, notebook = release.config.name, release.config.notebook
    exported = course / "source" / name / notebook
    if not exported.is_file():
        raise FileNotFoundError(f"{exported}: export the assignment first (autograder export nbgrader {assignment} "
                                f"--course {course})")
    exported_nb = nbformat.read(exported, as_version=4)
    ids, by_hand = check_grade_ids(exported_nb), hand_graded_ids(exported_nb)
    picked, empty = _picked_notebooks(course / "submitted", name, notebook, students, release.student_code)
    submitted = [path for _, _, path, _ in picked]
    config = nbgrader_config(course)
    coursedir = CourseDirectory(config=config, root=str(course))
    db, course_id = coursedir.db_url, coursedir.course_id
    with Gradebook(db, course_id) as gb:
        try:
            gb.find_assignment(name)
        except MissingEntry:
            raise FileNotFoundError(f"{db} has no assignment {name!r}: run `nbgrader generate_assignment {name}` "
                                    f"in {course} first") from None
    students_ids = unique_ids([student for student, _, _, _ in picked])  # the progress lines name the students
    notes = {i: note for i, (_, _, _, note) in zip(students_ids, picked) if note}
    nb_id = Path(notebook).stem
    by_formgrader = _HandGrades(db, course_id, nb_id, name, dict(zip(students_ids, (s for s, _, _, _ in picked))),
                                ids, by_hand)
    with tempfile.TemporaryDirectory(prefix="ag-nbgrader-") as tmp:  # results go to the gradebook, not here
        options = GradeOptions(Path(tmp), quiet=quiet, trusted=trusted, ids=students_ids, summary=False, notes=notes,
                               settle=by_formgrader)
        results = grade(release, submitted, options) if submitted else []
    scores = _Scores()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy notes nbgrader's own autograde shows too
        warnings.filterwarnings("ignore", module="sqlalchemy")
        for student, folder in empty:
            with Gradebook(db, course_id) as gb:
                _submission_entry(gb, coursedir, name, student, folder)
                for g in gb.find_submission_notebook(nb_id, name, student).grades:  # nbgrader autograde's way
                    g.auto_score, g.needs_manual_grade = 0.0, False
                gb.db.commit()
            scores[student] = 0.0
        for (student, folder, path, _), result in zip(picked, results):
            with Gradebook(db, course_id) as gb:
                _submission_entry(gb, coursedir, name, student, folder)
                for check in result.checks:
                    graded = by_formgrader.status_before(result.submission, check)  # before formgrader's points
                    grade_id = ids.get(check.name)
                    if grade_id is None:  # a written answer (its cell's grade_id is the check's name): nbgrader's
                        if graded == FAILED:  # not answered (submitted as handed out): 0, as autograde gives
                            _unanswered(gb, check, by_hand.get(check.name, check.name), nb_id, name, student)
                        continue
                    g = gb.find_grade(grade_id, nb_id, name, student)
                    if graded == PENDING and check.status != PENDING:  # graded by hand in formgrader
                        g.auto_score, g.needs_manual_grade = None, False
                    elif check.status in (PENDING, UNGRADED):  # no score yet: flagged for the instructor, never 0
                        g.auto_score, g.needs_manual_grade = None, True
                    else:
                        g.auto_score, g.needs_manual_grade = check.score, False
                setup = gb.find_grade(SETUP_ID, nb_id, name, student)
                setup.auto_score, setup.needs_manual_grade = 0.0, False
                gb.db.commit()
            penalty = _late_penalty(config, db, course_id, nb_id, name, student)
            if penalty:
                scores.late[student] = penalty
                result.notes.append(f"Submitted after the due date: the course's late penalty takes {penalty:g} "
                                    f"point(s) off, so this grade is {max(0.0, result.score - penalty):g} "
                                    f"/ {result.max_score:g}.")
            autograded = course / "autograded" / student / name / notebook
            feedback = course / "feedback" / student / name / f"{nb_id}.html"
            autograded.parent.mkdir(parents=True, exist_ok=True)
            _write_autograded(path, autograded, result, ids)  # formgrader shows this copy, with each grade's reason
            write_atomic(feedback, submission_html(result, release.config.title))
            for carried in CARRIED:  # release_feedback finds the student's exchange folder by these
                if (folder / carried).is_file():
                    for target in (autograded.parent, feedback.parent):
                        _replace_copy(folder / carried, target / carried)
            scores[student] = result.score
            scores.not_final |= bool(result.ungraded)
    return scores


def _submission_entry(gb, coursedir, name: str, student: str, folder: Path) -> None:
    """The student and their submission in the gradebook, timestamped as nbgrader autograde reads it."""
    gb.update_or_create_student(student)
    timestamp = coursedir.get_existing_timestamp(str(folder))
    if timestamp:
        gb.update_or_create_submission(name, student, timestamp=timestamp)
    else:
        gb.update_or_create_submission(name, student)


class _HandGrades:
    """Points entered by hand in formgrader, given to each result as it is graded (GradeOptions.settle): the
    progress line, the feedback page and the total say the grade with them. A pending check (a written answer, a
    `manual` check) with a manual grade is that grade; so is a written answer submitted as handed out (0 without
    one, as nbgrader's autograde gives it)."""

    def __init__(self, db: str, course_id: str, nb_id: str, name: str, students: dict[str, str],
                 ids: dict[str, str], by_hand: dict[str, str]):
        self.db, self.course_id, self.nb_id, self.name = db, course_id, nb_id, name
        self.students, self.ids, self.by_hand = students, ids, by_hand  # result id -> student; check -> grade_id
        self.before: dict[tuple[str, str], str] = {}  # (result id, check) -> its status before the hand grade

    def __call__(self, result) -> None:
        student = self.students.get(result.submission)
        manual = self._manual_scores(student) if student is not None else {}
        for check in result.checks:
            written = check.name not in self.ids
            score = manual.get(self.ids.get(check.name) or self.by_hand.get(check.name, check.name))
            if score is not None and (check.status == PENDING or (written and check.status == FAILED)):
                self.before[(result.submission, check.name)] = check.status
                _graded_by_hand(check, score)

    def status_before(self, result_id: str, check) -> str:
        """The check's status as graded, before any hand grade."""
        return self.before.get((result_id, check.name), check.status)

    def _manual_scores(self, student: str) -> dict[str, float]:
        from nbgrader.api import Gradebook, MissingEntry

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="nbgrader")
            warnings.filterwarnings("ignore", module="sqlalchemy")
            with Gradebook(self.db, self.course_id) as gb:
                try:
                    grades = gb.find_submission_notebook(self.nb_id, self.name, student).grades
                except MissingEntry:  # not graded before: nothing entered by hand
                    return {}
                return {g.name: float(g.manual_score) for g in grades if g.manual_score is not None}


def _unanswered(gb, check, grade_id: str, nb_id: str, name: str, student: str) -> None:
    """A written answer submitted as handed out: auto score 0, no manual grade needed, as nbgrader's autograde
    records it; points the instructor gave it in formgrader still count (_HandGrades gave them to the check)."""
    from nbgrader.api import MissingEntry

    try:
        grade = gb.find_grade(grade_id, nb_id, name, student)
    except MissingEntry:
        return
    grade.auto_score, grade.needs_manual_grade = 0.0, False


def _graded_by_hand(check, score: float) -> None:
    """A pending check as the instructor graded it in formgrader: its score, no longer pending."""
    check.score = max(0.0, min(score, check.max_score))
    check.status = status_of(check.score, check.max_score)
    check.message = f"graded by hand: {check.score:g} / {check.max_score:g}"


def _picked_notebooks(submitted: Path, name: str, notebook: str, students: list[str] | None, released: frozenset[str]
                      ) -> tuple[list[tuple[str, Path, Path, str]], list[tuple[str, Path]]]:
    """(student, their submitted/<student>/<name>/ folder, the notebook to grade, a note) for each student, the
    notebook picked by the rule every other path uses (submissions.pick_notebook: "Untitled.ipynb" with the work
    in it beats the untouched handout); and (student, folder) for each folder that holds no notebook, named on
    stderr (nbgrader autograde gives such a submission 0). A student asked for without a submission folder is
    named on stderr: nothing of theirs goes into the gradebook."""
    from autograder.submissions import candidates, other_notebooks, pick_notebook

    folders = sorted(p for p in submitted.glob(f"*/{name}") if p.is_dir() and not p.parent.name.startswith(".")
                     and (students is None or p.parent.name in students))
    course = submitted.parent  # a notebook of another assignment of the course is never graded for this one
    known = [p.name for d in (course / "source" / name, course / "release" / name) for p in candidates(d)]
    everyone = [p for p in submitted.glob(f"*/{name}") if p.is_dir()]
    others = other_notebooks(everyone, notebook, known)
    for student in sorted(set(students or ()) - {f.parent.name for f in folders}):
        print(f"warning: {student} has no submission of {name} in {submitted}", file=sys.stderr)
    picked, empty = [], []
    for folder in folders:
        path, note = pick_notebook(folder, notebook, released, others)
        if path is None:
            why = f": {note}" if note else ""
            print(f"warning: {folder.parent.name} submitted no notebook for {name} ({folder}): 0 in the gradebook, "
                  f"as nbgrader autograde gives{why}", file=sys.stderr)
            empty.append((folder.parent.name, folder))
        else:
            picked.append((folder.parent.name, folder, path, note))
    return picked, empty


def _replace_copy(src: Path, dst: Path) -> None:
    """Copy src over dst by replacing it, keeping dst's permissions: nbgrader's autograde leaves its files
    read-only (444), which an instructor who is not root cannot open for writing."""
    mode = dst.stat().st_mode & 0o7777 if dst.exists() else 0o644
    write_atomic(dst, src.read_bytes(), mode=mode)


VERDICTS_UP_TO_BYTES = 64 * 2**20  # a larger submission goes to formgrader as submitted, without the verdicts


def verdict_text(check) -> str:
    """What a grade cell of the autograded copy prints: the check's score and its message (formgrader shows it under
    the cell's "0 / 2"). A hidden check's message stays out (`nbgrader generate_feedback` would show it students)."""
    if check.status == PENDING:
        head = f"{check.name}: pending, {check.max_score:g} point(s)"
    elif check.status == UNGRADED:
        head = f"{check.name}: NOT GRADED (a problem of the grader, not of this notebook)"
    else:
        head = f"{check.name}: {check.score:g} / {check.max_score:g}"
    if check.visibility == "hidden":
        return head + " (a hidden check: its message is not shown in the notebook)\n"
    return head + (f"\n{check.message}" if check.message else "") + "\n"


def _write_autograded(submitted: Path, autograded: Path, result, ids: dict[str, str]) -> None:
    """The graded notebook where formgrader reads it: the submission, each autograded cell's output replaced by its
    check's verdict (what nbgrader's autograde leaves there is the cell's own run). A notebook nbformat cannot read
    is copied as it is, and so is one over VERDICTS_UP_TO_BYTES (reading it whole in this process could take
    gigabytes: docs/isolation.md)."""
    import nbformat

    by_cell = {ids[c.name]: c for c in result.checks if c.name in ids}
    try:
        nb = nbformat.read(submitted, as_version=4) if submitted.stat().st_size <= VERDICTS_UP_TO_BYTES else None
    except Exception:  # noqa: BLE001 - whatever a submission holds, formgrader still gets the file as submitted
        nb = None
    if nb is None:
        _replace_copy(submitted, autograded)
        return
    for cell in nb.cells:
        check = by_cell.get(nbgrader_meta(cell).get("grade_id"))
        if cell.get("cell_type") == "code" and check is not None:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=verdict_text(check))]
            cell.execution_count = None
    mode = autograded.stat().st_mode & 0o7777 if autograded.exists() else 0o644
    write_atomic(autograded, nbformat.writes(nb), mode=mode)


def _late_penalty(config, db: str, course_id: str, nb_id: str, name: str, student: str) -> float:
    """The late penalty, assigned by nbgrader's own preprocessor (the course's penalty_method or plugin) on the
    scores the gradebook holds now."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import AssignLatePenalties

    resources = {"nbgrader": {"notebook": nb_id, "assignment": name, "student": student, "db_url": db}}
    AssignLatePenalties(config=config).preprocess(nbformat.v4.new_notebook(), resources)
    with Gradebook(db, course_id) as gb:
        return gb.find_submission_notebook(nb_id, name, student).late_submission_penalty


def course_of(paths: list[str]) -> Path | None:
    """The nbgrader course whose `submitted/` tree holds one of `paths` (a folder with nbgrader_config.py above
    it), else None."""
    for given in paths:
        path = Path(given).resolve()
        for folder in (path, *path.parents):
            if folder.name == "submitted" and (folder.parent / "nbgrader_config.py").is_file():
                return folder.parent
    return None


def scores_into_gradebook(course: Path, name: str, notebook: str, checks: dict[str, list],
                          by_hand: bool = False) -> list[str]:
    """Write scored checks (student -> CheckResults, such as the accuracy rubric's) into the course's gradebook,
    on the grade cells the export made for them, and assign the late penalty again on the new totals. Pending
    and ungraded checks are left as they are (needing a manual grade). `by_hand`: grades a person gave (the review
    page's), written as formgrader writes them (the manual score). Returns a line per student written."""
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.coursedir import CourseDirectory

    source = nbformat.read(Path(course) / "source" / name / notebook, as_version=4)
    ids = hand_grade_ids(source) if by_hand else check_grade_ids(source)
    config = nbgrader_config(Path(course))
    coursedir = CourseDirectory(config=config, root=str(course))
    db, course_id, nb_id = coursedir.db_url, coursedir.course_id, Path(notebook).stem
    lines = []
    for student, results in sorted(checks.items()):
        scored = [c for c in results if c.status not in (PENDING, UNGRADED) and c.name in ids]
        if not scored:
            continue
        with Gradebook(db, course_id) as gb:
            try:
                for check in scored:
                    g = gb.find_grade(ids[check.name], nb_id, name, student)
                    if by_hand:
                        g.manual_score, g.needs_manual_grade = check.score, False
                    else:
                        g.auto_score, g.needs_manual_grade = check.score, False
            except MissingEntry:
                lines.append(f"{student}: not in the gradebook of {course} (grade with autograder nbgrader-grade first)")
                continue
            gb.db.commit()
        penalty = _late_penalty(config, db, course_id, nb_id, name, student)
        late = f" (late penalty {penalty:g})" if penalty else ""
        lines.append(f"{student}: " + ", ".join(f"{c.name} {c.score:g}/{c.max_score:g}" for c in scored) + late)
    return lines


class _Scores(dict):
    """student -> score; `not_final`: some check could not be graded here (see autograder.judge.Judge.confirm);
    `late`: student -> the late penalty nbgrader's AssignLatePenalties assigned."""

    not_final = False

    def __init__(self):
        super().__init__()
        self.late: dict[str, float] = {}
