"""The repository harness works in: the one chokepoint for git, where harness's files lie
in it, and the task's lock."""
