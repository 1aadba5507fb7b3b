"""The package's import graph, function-level imports included, read with ast (nothing is imported).

    python tools/imports.py            the layers, then any import that runs back up or goes round a circle
    python tools/imports.py --graph    every module and what it imports

Layers, lowest first (LAYERS below): a module may import its own layer and the layers under it, never one
above. A package (a folder of the package) lies in one layer whole, so that the graph drawn per folder has no
import back up either; a package with a face (FACES below) is imported from outside only through its __init__.
Exit status 1 when an import runs back up, modules import each other in a circle, a package is split between
layers, or an import goes past a face.
tests/test_layers.py runs this check.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"

# lowest first; a module belongs to the first entry whose prefix names it (a package prefix covers its modules)
LAYERS: list[tuple[str, list[str]]] = [
    ("foundations", ["autograder.errors", "autograder.pins", "autograder.status", "autograder.files", "autograder.seeding", "autograder.config",
                     "autograder.notebook"]),
    ("processes", ["autograder.sandbox"]),
    ("checks", ["autograder.testing", "autograder.checkspecs", "autograder.substitution", "autograder.cell_names",
                "autograder.kernel", "autograder.program", "autograder.judge", "autograder.deferred"]),
    ("release format and recording data", ["autograder.recording", "autograder.release"]),
    ("results and inputs", ["autograder.reports", "autograder.submissions"]),
    ("build", ["autograder.student_checks", "autograder.student", "autograder.build", "autograder.corpus"]),
    ("grading", ["autograder.grading"]),
    ("services", ["autograder.selfcheck", "autograder.verify", "autograder.export", "autograder.rubric", "autograder.review",
                  "autograder.importers", "autograder.scaffold", "autograder.mutants", "autograder.similarity"]),
    ("command line", ["autograder.commands", "autograder.cli"]),
    ("process map", ["autograder.entrypoints", "autograder.__main__"]),
]


# packages that declare a face: their __init__ names their public API (lazily), and every module outside the package
# imports them through it only (`from autograder.sandbox import WorkerProcess`), never a module of theirs
FACES = ["autograder.sandbox"]
# modules outside a face that import its modules anyway, and why
FACE_EXCEPTIONS: dict[str, str] = {}  # module -> why it may import a face package's modules (none today)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: frozenset[str] = frozenset()) -> set[str]:
    """Modules of the package that `path` imports, anywhere in it (TYPE_CHECKING blocks included). `from P import m`
    where P.m is one of `modules` imports P.m, not P's __init__ (as `import P.m` does): a package's modules may take
    each other by that form without going round through a face that names them (FACES)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            named = {f"{base}.{a.name}" for a in node.names}
            if not named <= modules:  # a name defined in `base` (its __init__), not only its modules
                found.add(base)
            found |= named
    # `from autograder import x` names the package only as where x lives: its __init__ holds a docstring
    return {m for m in found if m.startswith("autograder.")}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    names = frozenset(modules)
    return {name: {m for m in imports_of(path, names) if m in modules and m != name} for name, path in modules.items()}


def layer_of(module: str) -> int:
    if module == "autograder":  # the package's __init__: a docstring, imports nothing
        return 0
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise LookupError(f"{module} is in no layer of tools/imports.py")


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    return [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
            for m in sorted(g) for t in sorted(g[m]) if layer_of(t) > layer_of(m)]


def split_packages(g: dict[str, set[str]]) -> list[str]:
    """Packages below autograder/ whose modules are in more than one layer (drawn per folder, such a package
    would import itself back up)."""
    layers: dict[str, set[int]] = {}
    for m in g:
        parts = m.split(".")
        for depth in range(2, len(parts)):
            layers.setdefault(".".join(parts[:depth]), set()).add(layer_of(m))
    return [f"{p} is in layers {', '.join(LAYERS[i][0] for i in sorted(ls))}"
            for p, ls in sorted(layers.items()) if len(ls) > 1]


def face_of(module: str) -> str | None:
    """The face package `module` is a module of (not its __init__), if any."""
    return next((f for f in FACES if module.startswith(f + ".")), None)


def face_bypasses(g: dict[str, set[str]]) -> list[str]:
    """Imports of a face package's modules from outside the package (FACE_EXCEPTIONS aside)."""
    return [f"{m} imports {t}: {face} is imported from outside only through its __init__ (from {face} import ...)"
            for m in sorted(g) if m not in FACE_EXCEPTIONS for t in sorted(g[m])
            if (face := face_of(t)) is not None and m != face and not m.startswith(face + ".")]


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    g = graph()
    if "--graph" in argv:
        for m in sorted(g):
            print(f"{m}: {', '.join(sorted(g[m]))}")
        return 0
    for name, prefixes in LAYERS:
        print(f"{name}: {', '.join(prefixes)}")
    print(f"faces: {', '.join(FACES)}")
    problems = upward_imports(g) + [" -> ".join(c) for c in circles(g)] + split_packages(g) + face_bypasses(g)
    for p in problems:
        print(f"PROBLEM: {p}")
    print(f"{len(g)} modules; {len(upward_imports(g))} imports back up; {len(circles(g))} circles; "
          f"{len(face_bypasses(g))} imports past a face")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
