"""The diff gate: how a worker's patches are read (names as git reads them, collisions
between spellings) and refused or accepted, before anything touches the repository."""
