"""docs/architecture.md stays true: its tree names every module of the package, and every `python -m` entry point
named in the package's docstrings and the docs exists (the role of autograder.entrypoints, or a module that runs as
a script). Each module can be read at once: none is over MAX_LINES lines but those listed, each with its reason."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "autograder"


def _tree() -> dict[str, set[str]]:
    """The tree block of docs/architecture.md: words per top-level folder ('' for the package's own files)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    words: dict[str, set[str]] = {}
    folder = None
    for line in block.splitlines():
        if line.startswith("autograder/"):
            folder = ""
            continue
        if not line.startswith("  ") or folder is None:
            folder = None if not line.startswith(" ") else folder
            continue
        start = re.match(r"  (\w+)/\s", line)
        if start:
            folder = start.group(1)
        elif not line.startswith("   "):
            folder = ""
        words.setdefault(folder, set()).update(w.removesuffix(".py") for w in re.findall(r"[\w/.]+", line))
    return words


def test_every_module_of_the_package_is_in_the_architecture_tree():
    words = _tree()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
            if len(parts) == 1:
                if parts[0] not in words:
                    missing.append(str(path.relative_to(ROOT)))
                continue
        folder = parts[0] if len(parts) > 1 else ""
        needed = [f"{p}/" for p in parts[1:-1]] + [parts[-1]]
        known = words.get(folder, set())
        if not all(n in known or n.rstrip("/") in known for n in needed):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"docs/architecture.md's tree leaves out: {missing}"


def test_every_python_m_entry_point_named_exists():
    """Each `python -m autograder...` a docstring or a doc names runs: the module exists and runs as a script (run
    here with no arguments: the process map prints its usage, a module such as autograder.pins its output), and a
    role named for autograder.entrypoints is one of its ROLES."""
    import autograder.entrypoints as entrypoints

    texts = [p.read_text(encoding="utf-8") for p in [*PACKAGE.rglob("*.py"), *(ROOT / "docs").glob("*.md"),
                                                      ROOT / "README.md"]]
    named = {m for t in texts for m in re.findall(r"python3? (?:-[A-Za-z]+ )*-m (autograder[\w.]*)(?: ([\w-]+))?", t)}
    assert ("autograder.pins", "") in named and ("autograder.entrypoints", "worker") in named
    for module, role in sorted(named):
        path = PACKAGE.parent / (module.replace(".", "/") + ".py")
        package_main = PACKAGE.parent / module.replace(".", "/") / "__main__.py"
        assert path.is_file() or package_main.is_file(), f"`python -m {module}` names no module"
        source = (path if path.is_file() else package_main).read_text(encoding="utf-8")
        assert package_main.is_file() or '__name__ == "__main__"' in source, f"`python -m {module}` runs nothing"
        if module == "autograder.entrypoints" and role and not role.isupper():
            assert role in entrypoints.ROLES, f"`python -m autograder.entrypoints {role}`: no such role"
    for module in sorted({m for m, _ in named}):
        done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, cwd=ROOT, timeout=120)
        ran = done.returncode == 0 or "usage: python -m " + module in done.stderr
        assert ran, f"`python -m {module}`: exit {done.returncode}: {done.stderr[-500:]}"


MAX_LINES = 600
LONGER = {  # module -> why it is longer than MAX_LINES (a module leaves the list when it is split)
    "autograder/mutants/operators.py": "one visitor whose methods are the mutation operators, each reading the same "
                                       "context: reads best whole (its docstring says so)",
}


def _long_modules() -> dict[str, int]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        with path.open(encoding="utf-8") as lines:
            count = sum(1 for _ in lines)
        if count > MAX_LINES:
            found[path.relative_to(ROOT).as_posix()] = count
    return found


def test_no_module_is_longer_than_the_limit_but_those_listed_with_their_reason():
    long = _long_modules()
    unexplained = {module: count for module, count in long.items() if module not in LONGER}
    assert not unexplained, f"over {MAX_LINES} lines: split along a seam, or list with the reason: {unexplained}"
    assert all(reason.strip() for reason in LONGER.values())


def test_the_list_of_longer_modules_names_only_modules_that_are_longer():
    """A module split since it was listed leaves the list, so that the list cannot hide a later one."""
    stale = sorted(set(LONGER) - set(_long_modules()))
    assert not stale, f"no longer over {MAX_LINES} lines (take them off LONGER): {stale}"
