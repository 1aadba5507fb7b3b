"""Importers: other tools' assignments as this project's `solutions/<name>/` (`autograder import FORMAT SOURCE`).

One module per format (nbgrader.py, ...), a shared report (report.py) and the runtime the imported checks use
(cells.py). Every importer drops nothing silently: each solution, test and point of the source is converted
or named in solutions/<name>/IMPORT.md with the reason; what it cannot convert is left where `build` refuses it.
A source its own tool refuses (nbgrader's duplicate or blank grade_ids) is refused whole, nothing written.
"""
