"""The command line: parsing, dispatch, printing and exit codes."""
