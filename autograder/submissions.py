"""What `autograder grade` is given, turned into (student id, notebook) pairs.

Accepted inputs, mixed freely on one command line:

- notebook files: the id is the file name made folder-safe ("hw (1).ipynb" -> "hw_1");
- a folder of notebooks: every *.ipynb directly inside it, ids from the file names (any case: HW.IPYNB too), and
  each folder beside them that holds a notebook, as a submission folder (below);
- a folder of submission folders (no notebook directly inside, one folder per student, each holding the
  notebook and what it saves, such as the rubric's checkpoint, at any depth): the id is the folder's name;
- a Gradescope submissions export (the folder, or the .zip Gradescope downloads): one
  `submission_<n>/` folder per submission and `submission_metadata.yml`; the id is the submitter's
  SID, else their e-mail, else the folder name (group submissions join their members with "+");
- an nbgrader exchange tree: `submitted/<student>/<assignment>/*.ipynb` (the `submitted` folder or
  the course folder holding it); the id is the student folder's name.

Ids are folder names of --out: folder-safe, at most MAX_ID_BYTES bytes of UTF-8 (cut between characters), unique
also where the file system ignores case (`unique_ids`). Every notebook found inside a folder (a zip's: the folder
it was extracted into) is checked for links leaving it (`refuse_links_out`) and records where it was found
(`Submission.found_at`), where grading/staging.py reads it from without following a link.

Inside a submission folder one rule picks the notebook (`pick_notebook`, also Gradescope's runner's): the
notebook named like the assignment's unless it is as handed out (untouched), then the one with the student's
work; the result's notes say which was graded and why. A notebook known to be another one of the same assignment
or course (`other_notebooks`: part1.ipynb where part2.ipynb is graded) is never graded in its place: a folder
holding only such notebooks is missing the assignment's, and scores 0, as nbgrader scores a missing notebook.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import unicodedata
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.files import file_digest, resolved

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_EXTRACTED_BYTES = 256 * 1024 * 1024  # per notebook taken from a zip (the reader's own limit)
MAX_ZIP_BYTES = 4 * 1024 * 1024 * 1024  # all that one zip may put on the disk (a zip bomb stops there)


@dataclass
class Submission:
    """One submission to grade: its id and the notebook chosen for it, or why it is not graded."""

    student: str  # id from the layout; made folder-safe and unique by `discover`
    path: Path  # the notebook (may not exist: graded as unreadable, with a result row)
    note: str = ""  # how the notebook was chosen, when there was a choice
    refused: str = ""  # why it is not graded at all (a link leaving the submissions folder): its row says so
    named_by_file: bool = False  # its id is its file's name, not a student the layout names
    # the submissions folder it was found in and its path there, links resolved (`refuse_links_out`): where staging
    # reads it from without following a link (grading/staging.py); None for a file named on the command line
    found_at: tuple[Path, Path] | None = None


@dataclass
class Inputs:
    """What `discover` made of the command line's arguments: the submissions, and what each argument was read as."""

    submissions: list[Submission]
    roots: list[Path] = field(default_factory=list)  # folders holding submissions
    layouts: list[str] = field(default_factory=list)  # what each argument was recognised as
    problems: list[str] = field(default_factory=list)  # arguments that held nothing to grade


NO_NOTEBOOK = "no notebook was submitted"  # the note and the row of a student whose layout holds no notebook


# What a grading run writes at the top of --out besides one folder per submission: a submission never gets
# one of these names as its id (a notebook named grades.csv.ipynb is graded as "grades.csv_submission").
RUN_FILES = frozenset({"grades.csv", "summary.md", "summary.csv", "class-report.html", "histogram.svg",
                       "pass-rates.svg", "index.html"})


NAME_MAX = 255  # bytes in one file name on the file systems results go to (ext4, XFS, btrfs, ZFS, tmpfs)
# an id names a folder of --out; what is added to it to name something else there must fit too: "-N" of a repeat
# (unique_ids, grading/resume.py: up to 8 bytes) and a temporary named after it (".<id>.XXXXXXXX.tmp<pid>": 21 bytes)
ID_ROOM = 55
MAX_ID_BYTES = NAME_MAX - ID_ROOM  # 200 bytes: 200 ASCII characters, 66 Chinese ones, 50 of 4 bytes


def cut_to_bytes(text: str, limit: int) -> str:
    """The longest start of `text` whose UTF-8 fits in `limit` bytes: never half of a character (a cut in the middle
    of a multibyte one drops that character whole)."""
    raw = text.encode("utf-8", "surrogatepass")
    return text if len(raw) <= limit else raw[:max(limit, 0)].decode("utf-8", "ignore")


def fold(name: str) -> str:
    """The key under which a case-insensitive file system (macOS, Windows) takes two names for one: "Alice" and
    "alice", "STRASSE" and "straße" (folded more widely than such systems fold: at worst a needless "-2")."""
    return unicodedata.normalize("NFC", name).casefold()


def safe_id(text: str, limit: int = MAX_ID_BYTES) -> str:
    """A folder name from `text`: letters and digits of any script (NFC, as a Mac's NFD names are not), ._@+-
    and _ only, at most `limit` bytes of UTF-8 (a file name's limit is in bytes: 90 Chinese characters are 270),
    never one of the run's own files, never beginning with @, + or - (which a spreadsheet opening grades.csv reads
    as a formula, and a shell as an option)."""
    text = unicodedata.normalize("NFC", text)
    base = cut_to_bytes(re.sub(r"[^\w.@+-]+", "_", text).lstrip("._@+-"), limit).rstrip("._") or "submission"
    return f"{base}_submission" if base.lower() in RUN_FILES else base


def numbered_id(base: str, n: int, limit: int = MAX_ID_BYTES) -> str:
    """`base`-n within `limit` bytes: the end of a long base gives way to the number."""
    suffix = f"-{n}"
    return cut_to_bytes(base, limit - len(suffix)) + suffix


def unique_ids(ids: list[str]) -> list[str]:
    """Folder-safe and unique (also where the file system ignores case: `fold`): a repeat gets the first of -2, -3,
    ... that no other id is, in input order. Each id, numbered or not, fits in MAX_ID_BYTES."""
    bases = [safe_id(raw) for raw in ids]
    taken: set[str] = set()
    out = []
    for base in bases:
        name, n = base, 1
        while fold(name) in taken:  # ends: each turn tries another number, and `taken` is finite
            n += 1
            name = numbered_id(base, n)
        taken.add(fold(name))
        out.append(name)
    return out


def submission_ids(paths: list[Path]) -> list[str]:
    """Folder-safe, unique ids from file names ("hw (1).ipynb" -> "hw_1", "张伟.ipynb" -> "张伟")."""
    return unique_ids([Path(p).stem for p in paths])


def is_notebook_name(path: Path) -> bool:
    """A notebook's file name, whatever its case (HW1.IPYNB from a Windows machine is one)."""
    return path.suffix.lower() == ".ipynb"


def candidates(folder: Path, readable: bool = True) -> list[Path]:
    """The notebooks under `folder` (any depth), shallowest first, then by name; what is inside hidden folders
    (Jupyter's checkpoints, a grading run's own copies) and macOS's `._` resource forks left out. `readable` False:
    the entries named *.ipynb that are no regular file (a FIFO, a link to nothing) instead."""
    if not folder.is_dir():
        return []
    found = (p for p in folder.rglob("*") if is_notebook_name(p) and p.is_file() == readable and not p.is_dir()
             and not any(part.startswith(".") for part in p.relative_to(folder).parts[:-1])
             and not p.name.startswith("._"))
    return sorted(found, key=lambda p: (len(p.relative_to(folder).parts), str(p)))


def changed_cells(path: Path, released: frozenset[str] = frozenset()) -> int | None:
    """How many of the notebook's code cells are not as handed out (None: it cannot be read). `released`: the
    digests of the student notebook's code cells (Release.student_code); without them (a release built by an
    older version) the solution cells that no longer hold the stub are counted."""
    from autograder.notebook.extract import is_test_cell
    from autograder.notebook.load import NotebookError, code_digests, read_notebook
    from autograder.notebook.markers import CODE_STUB

    try:
        nb, _ = read_notebook(path)
    except NotebookError:
        return None
    if released:  # test cells are the handout's, whoever added them (nbgrader's export adds its own): no work
        mine = {"cells": [c for c in nb.get("cells", []) if not is_test_cell(c)]}
        return sum(d not in released for d in code_digests(mine))
    solutions = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"
                 and isinstance(c.get("metadata", {}).get("nbgrader"), dict) and c.metadata["nbgrader"].get("solution")]
    return sum(CODE_STUB[-1] not in c.get("source", "") for c in solutions) if solutions else None


def named_like(name: str, wanted: str) -> bool:
    """Whether a notebook's file name is the assignment's notebook's, or starts like it ("vectors (2).ipynb")."""
    return name == wanted or Path(name).stem.lower().startswith(Path(wanted).stem.lower())


def other_notebooks(folders: list[Path], wanted: str | None, known: list[str] | tuple = ()) -> frozenset[str]:
    """The file names (lower case) of notebooks that are other notebooks of the same assignment or course than
    `wanted`, never its copies (named like it): those `known` (an nbgrader course's source/ and release/ notebooks
    of the assignment), and those submitted beside a notebook named `wanted` in at least two of the submission
    `folders` and in at least half of those that hold `wanted` (part1.ipynb beside part2.ipynb in every student's
    folder; not one student's scratch notebook)."""
    if not wanted:
        return frozenset()
    holding, beside = 0, Counter[str]()
    for folder in folders:
        names = {p.name.lower() for p in candidates(folder)}
        if wanted.lower() in names:
            holding += 1
            beside.update(names)
    common = {name for name, n in beside.items() if n >= 2 and 2 * n >= holding}
    return frozenset(name for name in common | {k.lower() for k in known}
                     if is_notebook_name(Path(name)) and not named_like(name, wanted.lower()))


def missing_note(wanted: str, theirs: list[str]) -> str:
    """The note of a folder holding only `theirs` (other notebooks of the course): `wanted` is missing, and every
    check scores 0."""
    return (f"{wanted} is missing: it was not submitted ({', '.join(theirs)} "
            f"{'is another notebook' if len(theirs) == 1 else 'are other notebooks'} of this course, graded with "
            f"{'its' if len(theirs) == 1 else 'their'} own assignment, not in its place); every check scores 0, as "
            "nbgrader scores a missing notebook")


def pick_notebook(folder: Path, wanted: str | None, released: frozenset[str] = frozenset(),
                  others: frozenset[str] = frozenset()) -> tuple[Path | None, str]:
    """The notebook to grade among those a submission holds (under `folder`, any depth), and a note saying
    which and why when there was a choice. One rule on every path (Gradescope's runner, `autograder grade` on
    an export or an nbgrader tree):

    1. the notebook named like the assignment's (`wanted`; else one whose name starts like it, "vectors
       (2).ipynb"), unless it holds none of the student's work (it is as handed out: its code cells are those
       of the released student notebook; or it cannot be read while another can);
    2. else the notebook with the most of the student's work (code cells changed from the release);
    3. else (every notebook as handed out) the one named like the assignment's, else the first.

    The notebooks named in `others` (`other_notebooks`: lower-case names of other notebooks of the same assignment
    or course) are never picked: a folder holding only those gives (None, why the assignment's notebook is missing).
    """
    found = candidates(folder)
    theirs = [p for p in found if p.name.lower() in others and not (wanted and named_like(p.name, wanted))]
    if found and len(theirs) == len(found) and wanted:
        unreadable = [p for p in candidates(folder, readable=False) if named_like(p.name, wanted)]
        if unreadable:  # the assignment's, graded as what it is: its row says why
            return unreadable[0], ""
        return None, missing_note(wanted, [p.relative_to(folder).as_posix() for p in theirs])
    everything, found = found, [p for p in found if p not in theirs]
    if not found:
        unreadable = candidates(folder, readable=False)  # graded as what they are: their row says why
        return (unreadable[0], "") if unreadable else (None, "")
    rel = lambda p: p.relative_to(folder).as_posix()  # noqa: E731 - the notes name files as the student does

    def also(chosen: Path) -> str:  # (the course's other notebooks are graded with their own assignments: not said)
        left = [rel(p) for p in found if p != chosen]
        return "; also submitted, not graded: " + ", ".join(left) if left else ""

    if len(found) == 1 and len(everything) == 1:
        return found[0], ""
    if len(found) == 1:  # beside other notebooks of the course only: the one to grade
        renamed = wanted and not named_like(found[0].name, wanted)
        return found[0], f"graded {rel(found[0])}: no notebook is named {wanted}" if renamed else ""
    stem = Path(wanted).stem.lower() if wanted else ""
    named = [p for p in found if p.name == wanted] + \
        [p for p in found if stem and p.name != wanted and p.stem.lower().startswith(stem)]
    work = {p: changed_cells(p, released) for p in found}

    with_work = sorted((p for p in found if work[p]), key=lambda p: (-(work[p] or 0), p not in named))
    if named and (work[named[0]] or (work[named[0]] is None and not with_work)):
        return named[0], f"graded {rel(named[0])}: it is named like the assignment's notebook" + also(named[0])
    if with_work:
        chosen = with_work[0]
        if named:
            why = (f"{rel(named[0])} is the notebook as handed out, with none of your code in it"
                   if work[named[0]] == 0 else f"{rel(named[0])} could not be read")
        else:
            why = f"no notebook is named {wanted}" if wanted else "several notebooks were submitted"
        return chosen, (f"graded {rel(chosen)}: {why}, and {rel(chosen)} holds the most of your work "
                        f"({work[chosen]} code cell(s) changed from the notebook handed out)" + also(chosen))
    chosen = named[0] if named else found[0]
    why = ("every notebook submitted is as handed out, with none of your code in it"
           if all(w == 0 for w in work.values()) else "none of the notebooks submitted shows work of yours")
    return chosen, (f"graded {rel(chosen)}: {why}; "
                    + ("it is named like the assignment's notebook" if named else "it is the first by name")
                    + also(chosen))


# -- Gradescope ---------------------------------------------------------------------------------------

def _gradescope_submitters(metadata: Path) -> dict[str, list[dict]]:
    """submission folder name -> submitters ({'name', 'sid', 'email'}), from submission_metadata.yml."""
    text = metadata.read_text(encoding="utf-8", errors="replace")
    try:
        import yaml

        data = yaml.safe_load(text)
        out = {}
        for key, value in (data or {}).items():
            people = (value or {}).get(":submitters") or (value or {}).get("submitters") or []
            out[str(key)] = [{k.lstrip(":"): ("" if v is None else str(v)) for k, v in p.items()}
                             for p in people if isinstance(p, dict)]
        return out
    except Exception:  # noqa: BLE001 - no PyYAML, or a file it rejects: read the fields we need by hand
        pass
    out: dict[str, list[dict]] = {}
    current = None
    for line in text.splitlines():
        top = re.match(r"^(\S[^:]*):\s*$", line)
        if top:
            current = out.setdefault(top.group(1).strip("'\""), [])
            continue
        field_ = re.match(r"^\s*(-\s+)?:(name|sid|email):\s*(.*)$", line)
        if field_ and current is not None:
            if field_.group(1) or not current:
                current.append({})
            current[-1][field_.group(2)] = field_.group(3).strip().strip("'\"")
    return out


def _gradescope(folder: Path, wanted: str | None, released: frozenset[str] = frozenset()) -> list[Submission]:
    people = _gradescope_submitters(folder / GRADESCOPE_METADATA)
    subs = []
    names = {p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and not is_output_folder(p)} \
        | {k for k in people if k.startswith("submission_")}
    others = other_notebooks([folder / name for name in names], wanted)
    for sub_dir in sorted(folder / name for name in names):  # a name in the metadata only: nothing uploaded
        submitters = people.get(sub_dir.name, [])
        names = [p.get("sid") or p.get("email") or "" for p in submitters]
        student = "+".join(sorted(n for n in names if n)) or sub_dir.name
        subs.append(_submission(student, sub_dir, wanted, released, others))
    return subs


def extract_zip(archive: Path, into: Path) -> tuple[Path, dict[Path, str]]:
    """The notebooks and metadata of a Gradescope export zip, extracted safely (no paths outside
    `into`, no member over MAX_EXTRACTED_BYTES, at most MAX_ZIP_BYTES in all, nothing but .ipynb files and the
    metadata), into a folder named by the zip's name and the digest of its bytes: two exports of the same name
    (two `export.zip` from two folders) each keep their own, and the same zip given again is extracted again.
    Also: each member not to be graded (its extracted path) -> why: cut at MAX_EXTRACTED_BYTES (said with its own
    size), or its data not what its header declares."""
    target = into / f"{safe_id(archive.stem, MAX_ID_BYTES - 13)}-{file_digest(archive)[:12]}"  # the digest kept whole
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    total, refused = MAX_ZIP_BYTES, {}
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
            if info.is_dir() or not parts or ".." in parts or name.startswith("/"):
                continue
            if not (parts[-1].endswith(".ipynb") or parts[-1] == GRADESCOPE_METADATA) or total <= 0:
                continue  # (past MAX_ZIP_BYTES: the member is not extracted, its submission gets a row without it)
            dest = target.joinpath(*map(_fitting_name, parts))
            dest.parent.mkdir(parents=True, exist_ok=True)
            copied, why = _extract_member(zf, info, dest, min(MAX_EXTRACTED_BYTES + 1, total))
            total -= copied
            if why:
                refused[dest] = f"{parts[-1]} {why}"
    # an export zipped with its top folder: use the folder holding the metadata
    meta = sorted(target.rglob(GRADESCOPE_METADATA), key=lambda p: len(p.parts))
    return (meta[0].parent if meta else target), refused


def _fitting_name(name: str) -> str:
    """A zip member's path component as a file name this file system takes: as it is within NAME_MAX bytes, else cut
    (never inside a character) with a digest of the whole name and its extension kept ("<start>~1a2b3c4d.ipynb")."""
    if len(name.encode("utf-8", "surrogatepass")) <= NAME_MAX:
        return name
    suffix = Path(name).suffix if len(Path(name).suffix.encode("utf-8", "surrogatepass")) <= 16 else ""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cut_to_bytes(name[:len(name) - len(suffix)], NAME_MAX - len(suffix.encode()) - 9)}~{digest}{suffix}"


def _extract_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, limit: int) -> tuple[int, str]:
    """Copy one member to `dest`, at most `limit` bytes: (bytes copied, why it is not to be graded or "")."""
    with open(dest, "wb") as dst:
        try:
            with zf.open(info) as src:
                copied = _copy_at_most(src, dst, limit)
        # its data not what its header says, or a method or encryption zipfile cannot read
        except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
            return dst.tell(), f"could not be read from the zip ({exc}): not graded"
    if copied > MAX_EXTRACTED_BYTES:  # the copy stops there: its size on the disk is not the member's
        return copied, f"is {_member_size(info)}, over the {MAX_EXTRACTED_BYTES >> 20} MB limit"
    return copied, ""


# deflate's largest expansion is about 1032:1: a header declaring more than that for its data is not to be believed
_MAX_EXPANSION = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: 1032}


def _member_size(info: zipfile.ZipInfo) -> str:
    """The size of a member over MAX_EXTRACTED_BYTES, for its message: the size its header declares (zipfile never
    reads more than that) where its compressed data can hold that much, else only what the copy showed."""
    declared, expansion = info.file_size, _MAX_EXPANSION.get(info.compress_type)
    if declared <= MAX_EXTRACTED_BYTES or (expansion and declared > expansion * info.compress_size):
        return f"more than {MAX_EXTRACTED_BYTES >> 20} MB"  # a lying header: the real size is known by reading it all
    megabytes = declared / 2**20
    # just over the limit: in bytes, not rounded down to the limit's own number
    return f"{megabytes:.0f} MB" if round(megabytes) > MAX_EXTRACTED_BYTES >> 20 else f"{declared:,} bytes"


def _copy_at_most(src, dst, limit: int) -> int:
    """Copy up to `limit` bytes from src to dst; the number copied."""
    left = limit
    while left > 0:
        chunk = src.read(min(1 << 20, left))
        if not chunk:
            break
        dst.write(chunk)
        left -= len(chunk)
    return limit - left


# -- nbgrader -----------------------------------------------------------------------------------------

def _submission(student: str, folder: Path, wanted: str | None, released: frozenset[str],
                others: frozenset[str]) -> Submission:
    """The submission of a student's folder: the notebook `pick_notebook` picks, else a row saying why there is
    none (no notebook at all, or only other notebooks of the course)."""
    path, note = pick_notebook(folder, wanted, released, others)
    if path is None:
        why = note or NO_NOTEBOOK
        return Submission(student, folder / (wanted or "notebook.ipynb"), why, refused=why)
    return Submission(student, path, note)


def _nbgrader(submitted: Path, assignment: str | None, wanted: str | None,
             released: frozenset[str] = frozenset()) -> list[Submission]:
    students = sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))
    names = {a.name for s in students for a in s.iterdir() if a.is_dir()}
    if assignment not in names and wanted and assignment:  # imported per notebook: ps1_problem2 is ps1's problem2
        named = [n for n in names if assignment == f"{n}_{Path(wanted).stem}"]
        assignment = named[0] if len(named) == 1 else assignment
    if assignment not in names and len(names) == 1:
        assignment = next(iter(names))  # a tree holding one assignment, named otherwise
    if not assignment:
        return []
    folders = [(s, s / assignment) for s in students if (s / assignment).is_dir()]  # else: other assignments only
    course = submitted.parent  # its source/ and release/ name every notebook of the assignment
    known = [p.name for d in (course / "source" / assignment, course / "release" / assignment) for p in candidates(d)]
    others = other_notebooks([f for _, f in folders], wanted, known)
    return [_submission(s.name, folder, wanted, released, others) for s, folder in folders]


def _is_nbgrader(folder: Path) -> Path | None:
    if folder.name == "submitted":
        return folder
    if (folder / "submitted").is_dir():
        return folder / "submitted"
    return None


# -- a folder of notebooks ---------------------------------------------------------------------------

def _folder_of_notebooks(folder: Path) -> list[Submission]:
    """Every *.ipynb entry of `folder` gets a row, whatever it is: a dangling link or a FIFO is graded as
    unreadable."""
    entries = sorted(p for p in folder.iterdir() if is_notebook_name(p) and not p.is_dir())
    return [Submission(i, p, named_by_file=True) for i, p in zip(submission_ids(entries), entries)]


def _folders_of_submissions(folder: Path, wanted: str | None, released: frozenset[str]) -> list[Submission]:
    """One submission per folder inside `folder` (a student's), the notebook picked by the rule; a folder holding
    none gets a row saying so. Hidden folders and grading output folders (a run's --out put there) are no
    student's."""
    students = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
                      and not is_output_folder(p) and p.name != "__pycache__")
    others = other_notebooks(students, wanted)
    return [_submission(student.name, student, wanted, released, others) for student in students]


OUTPUT_LOCK = ".grading.lock"  # what every grading output folder holds (grading/outdir.py)


def is_output_folder(folder: Path) -> bool:
    """A grading run's output folder (its lock file, and no notebook of its own at the top): a student's folder
    that holds a file of that name beside its notebook is still a student's."""
    if not (folder / OUTPUT_LOCK).exists():
        return False
    try:
        return not any(p.suffix.lower() == ".ipynb" for p in folder.iterdir())
    except OSError:
        return True


def refuse_links_out(subs: list[Submission], root: Path) -> None:
    """A notebook reached through a link that leaves the submissions folder `root` (the answer key, another student's
    notebook, a file elsewhere on the machine), whatever the layout and wherever the link is on its path, is not
    graded: its row says so. Every other records where it is inside `root` (`found_at`): the links check is made
    again, on the file that is read, when it is read (grading/staging.py). Each submission is checked against the
    folder it was found in: the notebooks of a zip against the folder it was extracted into, wherever that is."""
    root = resolved(root)
    for s in subs:
        if s.refused:
            continue
        if not s.path.exists():  # a link to nothing, a notebook missing: where it would be (staging refuses a link)
            real = resolved(s.path.parent) / s.path.name
            s.found_at = (root, real.relative_to(root)) if root in real.parents else None
            continue
        real = resolved(s.path)
        if root not in real.parents:
            s.refused = (f"{s.path.name} is reached through a link to a file outside the submissions folder "
                         f"({real}): not graded")
        else:
            s.found_at = (root, real.relative_to(root))


def refuse_unreadable(subs: list[Submission], refused: dict[Path, str]) -> None:
    """A notebook extract_zip could not take whole (`refused`: its path -> why) is not graded; its row says why,
    with the member's own size where it was cut at the limit (the cut copy's would read as the limit itself)."""
    why = {resolved(path): text for path, text in refused.items()}
    for s in subs:
        s.refused = s.refused or why.get(resolved(s.path), "")


# -- all together --------------------------------------------------------------------------------------

def _zip_submissions(archive: Path, unpack_dir: Path, notebook: str | None, released: frozenset[str],
                     inputs: Inputs) -> list[Submission]:
    """The submissions of a zip: a Gradescope export's, or each notebook's of another zip; a zip holding one notebook
    is one student's own (otter's grader.export(), work zipped to upload) and is named by the zip."""
    folder, refused = extract_zip(archive, unpack_dir)
    if (folder / GRADESCOPE_METADATA).is_file():
        found = _gradescope(folder, notebook, released)
    else:
        notebooks = sorted(folder.rglob("*.ipynb"))
        names = [archive] if len(notebooks) == 1 else notebooks
        found = [Submission(i, p, named_by_file=True) for i, p in zip(submission_ids(names), notebooks)]
    refuse_unreadable(found, refused)
    refuse_links_out(found, folder)  # its own folder, not the one the zip was in: --out is often elsewhere
    inputs.roots.append(folder.resolve())
    return found


def discover(args: list[str | Path], notebook: str | None = None, assignment: str | None = None,
             unpack_dir: Path | None = None, released: frozenset[str] = frozenset()) -> Inputs:
    """`notebook`: the assignment's notebook file name; `assignment`: its name (nbgrader folders);
    `unpack_dir`: where a zip export is extracted (required to accept zips); `released`: the student
    notebook's code digests (Release.student_code), to tell an untouched notebook (`pick_notebook`)."""
    inputs = Inputs([])
    loose: list[Path] = []
    for arg in map(Path, args):
        if arg.is_dir():
            nbg = _is_nbgrader(arg)
            if (arg / GRADESCOPE_METADATA).is_file():
                found, layout = _gradescope(arg, notebook, released), "Gradescope export"
            elif nbg is not None:
                found, layout = _nbgrader(nbg, assignment, notebook, released), "nbgrader submitted/ tree"
            elif any(is_notebook_name(p) and not p.is_dir() for p in arg.iterdir()):
                found, layout = _folder_of_notebooks(arg), "folder of notebooks"
                # students' folders beside the notebooks (a download of both kinds): each a submission too; a
                # folder holding no notebook (data/) is no student's
                beside = [s for s in _folders_of_submissions(arg, notebook, released) if not s.refused]
                if beside:
                    found, layout = found + beside, "folder of notebooks and submission folders"
            else:
                found, layout = _folders_of_submissions(arg, notebook, released), "folder of submission folders"
            refuse_links_out(found, arg)
            zips = sorted(p for p in arg.iterdir() if p.suffix.lower() == ".zip" and p.is_file())
            if zips and unpack_dir is not None:  # students' own zips beside them (otter's grader.export(), say)
                for archive in zips:
                    if arg.resolve() not in resolved(archive).parents:  # a link out: the answer key's bundle, say
                        found.append(Submission(safe_id(archive.stem), archive, named_by_file=True, refused=(
                            f"{archive.name} is reached through a link to a file outside the submissions folder "
                            f"({resolved(archive)}): not graded")))
                        continue
                    found += _zip_submissions(archive, unpack_dir, notebook, released, inputs)
                layout += f" and {len(zips)} zip(s)"
            inputs.roots.append(arg.resolve())
            inputs.layouts.append(f"{arg}: {layout}, {len(found)} submission(s)")
            if not found:
                inputs.problems.append(f"{arg}: no notebooks found ({layout})")
            inputs.submissions += found
        elif arg.suffix == ".zip" and arg.is_file():
            if unpack_dir is None:
                raise ValueError(f"{arg}: zip files need a folder to extract into")
            found = _zip_submissions(arg, unpack_dir, notebook, released, inputs)
            inputs.layouts.append(f"{arg}: zip, {len(found)} submission(s)")
            inputs.submissions += found
        else:
            loose.append(arg)
    if loose:
        given = {resolved(p) for p in loose}  # a file given by name is that file's submission, not its folder's too
        inputs.submissions = [s for s in inputs.submissions if resolved(s.path) not in given]
        inputs.submissions += [Submission(i, p, named_by_file=True) for i, p in zip(submission_ids(loose), loose)]
        inputs.layouts.append(f"{len(loose)} notebook file(s)")
    ids = unique_ids([s.student for s in inputs.submissions])
    for s, i in zip(inputs.submissions, ids):
        s.student = i
    return inputs
