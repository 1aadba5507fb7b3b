"""Long multibyte ids: a Gradescope export whose SIDs are 90 Chinese characters (two alike to the 90th, and a group
whose members join past the limit) and a folder of student folders named by 254 bytes of multibyte text, twins
differing only in case (Deseret letters, 4 bytes each; Cyrillic, 2 bytes each), every notebook the example's answer
key, graded by `autograder grade` (a run that once spun forever before grading anything). Prints the command, its
wall time and every row (each must get the key's score, each its own folder).

    python benchmarks/long_ids.py
"""
from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIDS = {"submission_1": ["张" * 45 + "伟" * 45], "submission_2": ["张" * 45 + "伟" * 45 + "x"],
        "submission_3": ["李" * 90 + "@example.edu", "王" * 90], "submission_4": ["1815"]}
TWINS = ["\U00010400" * 63 + "ab", "\U00010428" * 63 + "ab", "Ж" * 127, "ж" * 127]  # 254 bytes each


def inputs(folder: Path, key: Path) -> list[Path]:
    export, twins = folder / "export", folder / "twins"
    lines = ["---"]
    for name, sids in SIDS.items():
        lines += [f"{name}:", "  :submitters:"] + [f"  - :name: N\n    :sid: '{sid}'\n    :email: ''" for sid in sids]
    for sub in [export / name for name in SIDS] + [twins / name for name in TWINS]:
        sub.mkdir(parents=True)
        shutil.copy(key, sub / "vectors.ipynb")
    (export / "submission_metadata.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [export, twins]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="long-ids-") as tmp:
        source = Path(tmp) / "course" / "solutions" / "vectors"
        shutil.copytree(ROOT / "tests" / "example_course" / "solutions" / "vectors", source)
        subprocess.run([sys.executable, "-m", "autograder", "build", str(source)], check=True, capture_output=True)
        given = inputs(Path(tmp), source.parent.parent / "release" / "vectors" / "answer_key.ipynb")
        out = Path(tmp) / "out"
        command = [sys.executable, "-m", "autograder", "grade", str(source), *map(str, given), "--out", str(out),
                   "--quiet"]
        start = time.monotonic()
        code = subprocess.run(command, capture_output=True, text=True, timeout=600).returncode
        seconds = time.monotonic() - start
        rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8")))
        print(f"autograder grade vectors export/ twins/ --out out --quiet: exit {code}, {seconds:.1f} s, "
              f"{len(rows)} rows of {len(SIDS) + len(TWINS)} submissions")
        for row in rows:
            print(f"  {len(row['submission'].encode()):3d} bytes  total {row['total']:>3}  {row['submission']}")
        return 0 if code == 0 and len(rows) == len(SIDS) + len(TWINS) else 1


if __name__ == "__main__":
    sys.exit(main())
