"""An assignment's settings: `solutions/<name>/assignment.toml`."""
from __future__ import annotations

import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder import DISTRIBUTION
from autograder.errors import UserError

CONFIG_FILE = "assignment.toml"


class ConfigError(UserError, ValueError):
    """An assignment.toml that cannot be used: the message names the file and the setting."""

    pass


@dataclass
class Limits:
    """The `[limits]` table: what one submission's checks may take (seconds of wall time, megabytes)."""

    check_seconds: float = 60.0  # wall time for one check, all its calls into student code included: the most
    check_slowdown: float = 50.0  # ... or this many times what the reference took on the grading machine (0 = off)
    check_min_seconds: float = 10.0  # ... but never less than this
    import_seconds: float = 60.0  # wall time for loading a submission's definitions
    submission_seconds: float = 900.0  # wall time for all checks of one submission
    memory_mb: int = 6144  # memory a worker may allocate beyond the libraries it starts with (0 = no limit)
    output_mb: int = 64  # largest file a worker may write (its captured output included)


@dataclass
class AssignmentConfig:
    """An assignment's settings as load_config validated them; a release carries them in its MANIFEST (`to_dict`)."""

    name: str  # folder name: solutions/<name>, assignments/<name>, release/<name>
    title: str  # shown to students and in reports
    notebook: str  # source notebook file inside solutions/<name>/
    files: list[str] = field(default_factory=list)  # extra files shipped next to the student notebook
    limits: Limits = field(default_factory=Limits)
    gpu_checks: list[str] = field(default_factory=list)  # checks that need CUDA: pending without it
    student: dict = field(default_factory=dict)  # [student]: in-notebook checks, install cell (autograder.student)
    seed: dict = field(default_factory=dict)  # [seed]: {variable, grading, student?, cells?} (autograder/notebook/seedvar.py)
    # [environment]: variables set while grading, in the workers and around the checks (NBGRADER_EXECUTION)
    environment: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The settings as plain JSON data, the limits a nested table: what the release's MANIFEST holds."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "AssignmentConfig":
        """The settings read back from `to_dict`'s data (a release's MANIFEST), without validating them again."""
        return cls(**{**data, "limits": Limits(**data.get("limits", {}))})


def load_config(source_dir: Path) -> AssignmentConfig:
    """The settings of `source_dir`/assignment.toml (its folder's name is the assignment's), validated: ConfigError,
    naming the file and the setting, for a missing file, bad TOML, an unknown setting or a value of the wrong type."""
    path = source_dir / CONFIG_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: missing (every solutions/<name>/ folder needs an {CONFIG_FILE})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    known = {"title", "notebook", "files", "limits", "gpu", "student", "seed", "environment"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
    for key in ("title", "notebook"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ConfigError(f"{path}: '{key}' must be a non-empty string")
    limits = data.get("limits", {})
    bad = set(limits) - set(Limits.__dataclass_fields__)
    if bad:
        raise ConfigError(f"{path}: unknown [limits] setting(s) {sorted(bad)}")
    for key, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{path}: [limits] {key} must be a number, 0 or more (got {value!r})")
    return AssignmentConfig(
        name=source_dir.name, title=data["title"], notebook=data["notebook"], files=list(data.get("files", [])),
        limits=Limits(**limits), gpu_checks=list(data.get("gpu", {}).get("checks", [])),
        student=student_options(data.get("student", {}), str(path)), seed=seed_options(data.get("seed", {}), str(path)),
        environment=environment_options(data.get("environment", {}), str(path)))


_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def environment_options(data, where: str = "assignment.toml") -> dict:
    """Validate the `[environment]` table: names of environment variables -> string values, set while grading (in
    every worker, the reference's included, and in the judge while a check runs), as nbgrader's autograde sets
    NBGRADER_EXECUTION."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [environment] must be a table of variables")
    for name, value in data.items():
        if not _VARIABLE.fullmatch(name):
            raise ConfigError(f"{where}: [environment] {name!r} is not the name of an environment variable")
        if not isinstance(value, str) or "\0" in value:
            raise ConfigError(f"{where}: [environment] {name} must be a string (got {value!r})")
    return dict(data)


def seed_options(data, where: str = "assignment.toml") -> dict:
    """Validate the `[seed]` table (otter's seeding): a seed variable (`variable`, its `grading` value, and the
    `student` value the student notebook gets: optional, the source notebook's line is kept then), and/or `cells`,
    the seed of random's and numpy's generators before each code cell when grading (otter's `generate: seed:`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [seed] must be a table")
    if not data:
        return {}
    unknown = set(data) - {"variable", "grading", "student", "cells"}
    if unknown:
        raise ConfigError(f"{where}: unknown [seed] setting(s) {sorted(unknown)}; known: ['cells', 'grading', "
                          "'student', 'variable']")
    if "cells" in data and (isinstance(data["cells"], bool) or not isinstance(data["cells"], int)
                            or data["cells"] < 0):
        raise ConfigError(f"{where}: [seed] cells must be an integer >= 0, the seed of random's and numpy's "
                          f"generators before each code cell (got {data['cells']!r})")
    if "cells" in data and not set(data) & {"variable", "grading", "student"}:
        return dict(data)
    if not isinstance(data.get("variable"), str) or not data["variable"].isidentifier():
        raise ConfigError(f"{where}: [seed] variable must be a Python name (got {data.get('variable')!r})")
    for key in ("grading", "student"):
        if key in data and not isinstance(data[key], (int, float, str, bool)):
            raise ConfigError(f"{where}: [seed] {key} must be a number, a string or a boolean (got {data[key]!r})")
    if "grading" not in data:
        raise ConfigError(f"{where}: [seed] needs `grading`, the value the grader gives {data['variable']}")
    return dict(data)


STUDENT_OPTIONS = {"checks", "install"}  # the [student] table's settings (autograder/student.py)


def student_options(data, where: str = "assignment.toml") -> dict:
    """Validate the `[student]` table; returns it normalised ({"checks": bool, "install": [[module, pip]]})."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [student] must be a table")
    unknown = set(data) - STUDENT_OPTIONS
    if unknown:
        raise ConfigError(f"{where}: unknown [student] setting(s) {sorted(unknown)}; known: {sorted(STUDENT_OPTIONS)}")
    checks = data.get("checks", False)
    if not isinstance(checks, bool):
        raise ConfigError(f"{where}: [student] checks must be true or false")
    install = []
    for item in data.get("install", []):
        if isinstance(item, str) and item.strip():
            install.append([_module_of(item), item.strip()])
        elif isinstance(item, dict) and set(item) <= {"module", "pip"} and all(
                isinstance(item.get(k), str) and item.get(k) for k in ("module", "pip")):
            install.append([item["module"], item["pip"]])
        else:
            raise ConfigError(f"{where}: [student] install entries are requirement strings or "
                               f"{{module = \"...\", pip = \"...\"}} tables, not {item!r}")
    for module, pip in install:  # check() needs nothing installed: the setup cell carries its code (student_checks.py)
        if module == "autograder" or _module_of(pip) == DISTRIBUTION:
            raise ConfigError(f"{where}: [student] install lists {pip!r}: check() needs nothing installed (the "
                              "notebook carries its code), and students cannot install this project from a "
                              "package index; remove the entry")
    return {"checks": checks, "install": install} if (checks or install) else {}


def _module_of(requirement: str) -> str:
    """The import name of a requirement ("scikit-image>=0.2" -> "scikit_image"); use a table when it differs."""
    name = re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0]
    return name.replace("-", "_").replace(".", "_").lower()
