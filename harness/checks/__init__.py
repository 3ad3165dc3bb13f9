"""The checks of a landing: build and tests twice in sandboxed copies, acceptance criteria,
coverage, docstrings, citations and their evidence."""
