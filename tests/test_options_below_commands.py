"""No argparse namespace goes below the command layer: each verb in autograder/commands/ reads its parsed arguments
and hands the layer below an options object (GradeOptions, ReviewOptions, RubricCommandOptions, ...) or plain
values. Two scans of the source (ast), each shown to catch what it is for:

- in commands/, the namespace a Command's method receives (its first parameter after self) is passed on only to the
  command's own methods and to functions of the same module (followed there in turn), or read by getattr/hasattr;
- outside commands/ and cli.py, no module imports argparse (except a module that is its own command line, listed
  with its reason) and no annotation names `argparse.Namespace`.

What the scan does not follow: the namespace bound to another name first (`ns = args; f(ns)`), or put in a
container. A command that does that is read by its reviewer, as before.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"
COMMAND_LINE = {"autograder/cli.py"}
OWN_COMMAND_LINES = {  # modules outside commands/ with a command line of their own; why each may import argparse
    "autograder/export/gradescope.py": "main() is Gradescope's entry point (`python -m autograder.entrypoints "
                                       "gradescope run`): it parses its own argv and passes plain values to run()",
}
READS = {"getattr", "hasattr"}  # calls that read the namespace where it is, passing nothing of it below


def namespace_leaks(source: str, where: str = "<source>") -> list[str]:
    """Calls in a commands/ module that pass a Command method's namespace parameter to a callee outside the module
    (its own methods and functions excepted, followed where they receive it)."""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    tainted: list[tuple[ast.FunctionDef, str]] = []
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        for method in (node for node in cls.body if isinstance(node, ast.FunctionDef)):
            params = [a.arg for a in method.args.args]
            if len(params) >= 2 and params[0] == "self":
                tainted.append((method, params[1]))
    leaks: list[str] = []
    seen: set[tuple[str, str]] = set()
    while tainted:
        function, name = tainted.pop()
        if (function.name, name) in seen:
            continue
        seen.add((function.name, name))
        for call in (node for node in ast.walk(function) if isinstance(node, ast.Call)):
            passed = [(i, None) for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
            passed += [(None, k.arg) for k in call.keywords if isinstance(k.value, ast.Name) and k.value.id == name]
            if not passed:
                continue
            callee = call.func
            if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
                continue  # the command's own method: its namespace parameter is scanned as a method's
            if isinstance(callee, ast.Name) and callee.id in READS:
                continue
            if isinstance(callee, ast.Name) and callee.id in functions:
                local = functions[callee.id]
                params = [a.arg for a in local.args.args]
                for index, keyword in passed:
                    param = params[index] if index is not None and index < len(params) else keyword
                    if param:
                        tainted.append((local, param))
                continue
            leaks.append(f"{where}:{call.lineno} {function.name}() passes its namespace `{name}` to "
                         f"{ast.unparse(callee)}()")
    return sorted(leaks)


def argparse_below(source: str, where: str = "<source>") -> list[str]:
    """Imports of argparse, and annotations naming argparse.Namespace, in a module below the command layer."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(alias.name == "argparse" for alias in node.names):
            found.append(f"{where}:{node.lineno} imports argparse")
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            found.append(f"{where}:{node.lineno} imports from argparse")
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            every = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            every += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            annotations = [a.annotation for a in every if a.annotation is not None]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            text = annotation.value if isinstance(annotation, ast.Constant) else ast.unparse(annotation)
            if re.search(r"(?<![\w.])(argparse\.)?Namespace\b", str(text)):
                found.append(f"{where}:{node.lineno} annotates with {text}")
    return found


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), path.read_text(encoding="utf-8")


def test_no_command_passes_its_namespace_below_the_command_layer():
    leaks = [leak for rel, source in _modules() if rel.startswith("autograder/commands/")
             for leak in namespace_leaks(source, rel)]
    assert leaks == []


def test_no_module_below_the_command_layer_takes_an_argparse_namespace():
    found = [hit for rel, source in _modules()
             if not rel.startswith("autograder/commands/") and rel not in COMMAND_LINE | set(OWN_COMMAND_LINES)
             for hit in argparse_below(source, rel)]
    assert found == []


def test_the_scans_see_a_namespace_passed_below_and_an_argparse_import():
    leaking = ("from autograder.commands.base import Command\n"
               "class RubricCommand(Command):\n"
               "    def run(self, args):\n"
               "        from autograder.rubric import command\n"
               "        return self._run(args)\n"
               "    def _run(self, ns):\n"
               "        return helper(1, parsed=ns)\n"
               "def helper(n, parsed):\n"
               "    print(getattr(parsed, 'quiet', False))\n"
               "    return command.run(parsed)\n")
    assert namespace_leaks(leaking) == ["<source>:10 helper() passes its namespace `parsed` to command.run()"]
    clean = leaking.replace("command.run(parsed)", "command.run(Options(quiet=parsed.quiet))")
    assert namespace_leaks(clean) == []
    below = "import argparse\ndef run(args: 'argparse.Namespace') -> int:\n    x: Namespace = args\n"
    assert argparse_below(below) == ["<source>:1 imports argparse", "<source>:2 annotates with argparse.Namespace",
                                     "<source>:3 annotates with Namespace"]
    assert argparse_below("def run(ns: KernelNamespace, s: types.SimpleNamespace) -> None: ...\n") == []
