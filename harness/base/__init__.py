"""The foundation every other package stands on: errors and exit codes, the clock, printable text,
the one chokepoint for files, the schemas, path globs and reported metrics. Imports nothing
else of harness."""
