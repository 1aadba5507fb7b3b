"""Running an assignment's notebook top to bottom in a fresh Jupyter kernel, as a student would (end-to-end tests)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest


def execute_in_folder(notebook: Path, folder: Path, env: dict[str, str], name: str) -> tuple[Path, str]:
    """Run `notebook` in a fresh kernel whose working folder is `folder` and whose environment has `env` added; save
    the executed notebook there as `name`. Returns (its path, everything its code cells printed to stdout)."""
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    with pytest.MonkeyPatch.context() as mp:  # the kernel inherits the environment
        for key, value in env.items():
            mp.setenv(key, value)
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    path = folder / name
    nbformat.write(nb, path)
    stdout = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                     if o.get("output_type") == "stream" and o.get("name") == "stdout")
    return path, stdout
