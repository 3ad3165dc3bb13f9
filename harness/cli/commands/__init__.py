"""One module per command, each command a function of its parsed arguments returning the
exit code; harness/cli/main.py parses, imports the one module a command needs, and maps
errors to exit codes."""
