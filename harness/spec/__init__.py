"""What a repository asks for: the plan, its acceptance criteria, ai/harness.toml and the
checklist made from a plan."""
