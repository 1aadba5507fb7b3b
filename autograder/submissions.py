"""What `autograder grade` is given, turned into (student id, notebook) pairs.

Accepted inputs, mixed freely on one command line:

- notebook files: the id is the file name made folder-safe ("hw (1).ipynb" -> "hw_1");
- a folder of notebooks: every *.ipynb directly inside it, ids from the file names;
- a Gradescope submissions export (the folder, or the .zip Gradescope downloads): one
  `submission_<n>/` folder per submission and `submission_metadata.yml`; the id is the submitter's
  SID, else their e-mail, else the folder name (group submissions join their members with "+");
- an nbgrader exchange tree: `submitted/<student>/<assignment>/*.ipynb` (the `submitted` folder or
  the course folder holding it); the id is the student folder's name.

Inside a submission folder the notebook named like the assignment's wins, then the only notebook,
then one whose name starts like the assignment's ("vectors (2).ipynb"); otherwise the first in
name order, with a note saying so.
"""
from __future__ import annotations

import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_EXTRACTED_BYTES = 256 * 1024 * 1024  # per notebook taken from a zip (the reader's own limit)


@dataclass
class Submission:
    student: str  # id from the layout; made folder-safe and unique by `discover`
    path: Path  # the notebook (may not exist: graded as unreadable, with a result row)
    note: str = ""  # how the notebook was chosen, when there was a choice
    refused: str = ""  # why it is not graded at all (a link leaving the submissions folder): its row says so


@dataclass
class Inputs:
    submissions: list[Submission]
    roots: list[Path] = field(default_factory=list)  # folders holding submissions
    layouts: list[str] = field(default_factory=list)  # what each argument was recognised as
    problems: list[str] = field(default_factory=list)  # arguments that held nothing to grade


# What a grading run writes at the top of --out besides one folder per submission: a submission never gets
# one of these names as its id (a notebook named grades.csv.ipynb is graded as "grades.csv_submission").
RUN_FILES = frozenset({"grades.csv", "summary.md", "summary.csv", "class-report.html", "histogram.svg",
                       "pass-rates.svg", "index.html"})


def safe_id(text: str) -> str:
    """A folder name from `text`: letters, digits and ._@+- only, never one of the run's own files."""
    base = re.sub(r"[^A-Za-z0-9._@+-]+", "_", text).strip("._") or "submission"
    return f"{base}_submission" if base.lower() in RUN_FILES else base


def unique_ids(ids: list[str]) -> list[str]:
    """Folder-safe and unique: repeats get -2, -3, ... in input order."""
    out, seen = [], {}
    for raw in ids:
        base = safe_id(raw)
        n = seen.get(base.lower(), 0)
        seen[base.lower()] = n + 1
        out.append(base if n == 0 else f"{base}-{n + 1}")
    return out


def submission_ids(paths: list[Path]) -> list[str]:
    """Folder-safe, unique ids from file names ("hw (1).ipynb" -> "hw_1")."""
    return unique_ids([re.sub(r"[^A-Za-z0-9._-]+", "_", Path(p).stem) for p in paths])


def pick_notebook(folder: Path, wanted: str | None) -> tuple[Path | None, str]:
    """The notebook to grade among those under `folder` (any depth), and a note when it was a guess."""
    if not folder.is_dir():
        return None, ""
    found = sorted((p for p in folder.rglob("*.ipynb") if p.is_file() and ".ipynb_checkpoints" not in p.parts),
                   key=lambda p: (len(p.relative_to(folder).parts), str(p)))
    if not found:
        return None, ""
    if wanted:
        for p in found:
            if p.name == wanted:
                return p, ""
    if len(found) == 1:
        return found[0], ""
    stem = Path(wanted).stem.lower() if wanted else ""
    similar = [p for p in found if stem and p.stem.lower().startswith(stem)]
    chosen = similar[0] if similar else found[0]
    others = ", ".join(p.name for p in found if p != chosen)
    return chosen, f"{len(found)} notebooks submitted; graded {chosen.name} (not {others})"


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


def _gradescope(folder: Path, wanted: str | None) -> list[Submission]:
    people = _gradescope_submitters(folder / GRADESCOPE_METADATA)
    subs = []
    names = {p.name for p in folder.iterdir() if p.is_dir()} | {k for k in people if k.startswith("submission_")}
    for sub_dir in sorted(folder / name for name in names):  # a name in the metadata only: nothing uploaded
        submitters = people.get(sub_dir.name, [])
        names = [p.get("sid") or p.get("email") or "" for p in submitters]
        student = "+".join(sorted(n for n in names if n)) or sub_dir.name
        path, note = pick_notebook(sub_dir, wanted)
        if path is None:
            subs.append(Submission(student, sub_dir / (wanted or "notebook.ipynb"), "no notebook was submitted"))
        else:
            subs.append(Submission(student, path, note))
    return subs


def extract_zip(archive: Path, into: Path) -> Path:
    """The notebooks and metadata of a Gradescope export zip, extracted safely (no paths outside
    `into`, no member over MAX_EXTRACTED_BYTES, nothing but .ipynb files and the metadata)."""
    target = into / safe_id(archive.stem)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
            if info.is_dir() or not parts or ".." in parts or name.startswith("/"):
                continue
            if not (parts[-1].endswith(".ipynb") or parts[-1] == GRADESCOPE_METADATA):
                continue
            dest = target.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(dest, "wb") as dst:
                left = MAX_EXTRACTED_BYTES + 1
                while left > 0:
                    chunk = src.read(min(1 << 20, left))
                    if not chunk:
                        break
                    dst.write(chunk)
                    left -= len(chunk)
    # an export zipped with its top folder: use the folder holding the metadata
    meta = sorted(target.rglob(GRADESCOPE_METADATA), key=lambda p: len(p.parts))
    return meta[0].parent if meta else target


# -- nbgrader -----------------------------------------------------------------------------------------

def _nbgrader(submitted: Path, assignment: str | None, wanted: str | None) -> list[Submission]:
    subs = []
    students = sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))
    names = {a.name for s in students for a in s.iterdir() if a.is_dir()}
    if assignment not in names and len(names) == 1:
        assignment = next(iter(names))  # a tree holding one assignment, named otherwise
    for student in students:
        folder = student / assignment if assignment else None
        if folder is None or not folder.is_dir():
            continue  # this student submitted other assignments only
        path, note = pick_notebook(folder, wanted)
        if path is None:
            subs.append(Submission(student.name, folder / (wanted or "notebook.ipynb"), "no notebook was submitted"))
        else:
            subs.append(Submission(student.name, path, note))
    return subs


def _is_nbgrader(folder: Path) -> Path | None:
    if folder.name == "submitted":
        return folder
    if (folder / "submitted").is_dir():
        return folder / "submitted"
    return None


# -- a folder of notebooks ---------------------------------------------------------------------------

def _folder_of_notebooks(folder: Path) -> list[Submission]:
    """Every *.ipynb entry of `folder` gets a row, whatever it is: a dangling link or a FIFO is graded as
    unreadable; a link to a file outside the folder (the answer key, another student's notebook) is refused."""
    entries = sorted(p for p in folder.iterdir() if p.suffix == ".ipynb" and not p.is_dir())
    subs = [Submission(i, p) for i, p in zip(submission_ids(entries), entries)]
    root = folder.resolve()
    for s in subs:
        if s.path.is_symlink() and s.path.exists() and root not in s.path.resolve().parents:
            s.refused = (f"{s.path.name} is a link to a file outside the submissions folder "
                         f"({s.path.resolve()}): not graded")
    return subs


# -- all together --------------------------------------------------------------------------------------

def discover(args: list[str | Path], notebook: str | None = None, assignment: str | None = None,
             unpack_dir: Path | None = None) -> Inputs:
    """`notebook`: the assignment's notebook file name; `assignment`: its name (nbgrader folders);
    `unpack_dir`: where a zip export is extracted (required to accept zips)."""
    inputs = Inputs([])
    loose: list[Path] = []
    for arg in map(Path, args):
        if arg.is_dir():
            nbg = _is_nbgrader(arg)
            if (arg / GRADESCOPE_METADATA).is_file():
                found, layout = _gradescope(arg, notebook), "Gradescope export"
            elif nbg is not None:
                found, layout = _nbgrader(nbg, assignment, notebook), "nbgrader submitted/ tree"
            else:
                found, layout = _folder_of_notebooks(arg), "folder of notebooks"
            inputs.roots.append(arg.resolve())
            inputs.layouts.append(f"{arg}: {layout}, {len(found)} submission(s)")
            if not found:
                inputs.problems.append(f"{arg}: no notebooks found ({layout})")
            inputs.submissions += found
        elif arg.suffix == ".zip" and arg.is_file():
            if unpack_dir is None:
                raise ValueError(f"{arg}: zip files need a folder to extract into")
            folder = extract_zip(arg, unpack_dir)
            found = _gradescope(folder, notebook) if (folder / GRADESCOPE_METADATA).is_file() else \
                [Submission(i, p) for i, p in zip(submission_ids(sorted(folder.rglob("*.ipynb"))),
                                                  sorted(folder.rglob("*.ipynb")))]
            inputs.roots.append(folder.resolve())
            inputs.layouts.append(f"{arg}: zip export, {len(found)} submission(s)")
            inputs.submissions += found
        else:
            loose.append(arg)
    if loose:
        inputs.submissions += [Submission(i, p) for i, p in zip(submission_ids(loose), loose)]
        inputs.layouts.append(f"{len(loose)} notebook file(s)")
    ids = unique_ids([s.student for s in inputs.submissions])
    for s, i in zip(inputs.submissions, ids):
        s.student = i
    return inputs
