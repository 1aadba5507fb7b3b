"""tools/same_grades.py compares result files less their timings, and names where two results first differ."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import same_grades  # noqa: E402 - tools/ is not a package: its folder goes on the path first


def _result(message: str, seconds: float) -> dict:
    return {"score": 1.0, "execution_time": seconds * 3,
            "checks": [{"name": "a", "seconds": seconds, "message": "ok"}, {"name": "b", "seconds": 0.1,
                                                                           "message": message}]}


def _folder(tmp: Path, message: str, seconds: float) -> Path:
    (tmp / "s1").mkdir(parents=True)
    (tmp / "s1" / "grading.json").write_text(json.dumps(_result(message, seconds)))
    (tmp / "s1" / "feedback.md").write_text(f"# t\n\n- b\n    {message}\n")
    (tmp / "grades.csv").write_text(f"submission,a,b,total,seconds\ns1,1,0,1,{seconds}\n")
    return tmp


def test_timings_alone_are_no_difference(tmp_path):
    a, b = _folder(tmp_path / "a", "wrong", 1.0), _folder(tmp_path / "b", "wrong", 2.5)
    assert same_grades.differences(same_grades.comparable(a), same_grades.comparable(b), 300) == []


def test_a_changed_message_is_named_where_it_differs(tmp_path):
    a, b = _folder(tmp_path / "a", "wrong", 1.0), _folder(tmp_path / "b", "wrong shape", 1.0)
    found = same_grades.differences(same_grades.comparable(a), same_grades.comparable(b), 300)
    assert found == ["s1/feedback.md: (whole): '    wrong' != '    wrong shape'",
                     "s1/grading.json: checks[1].message: 'wrong' != 'wrong shape'"]
