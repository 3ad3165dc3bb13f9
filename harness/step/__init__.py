"""Running a task: the orchestrator (the run's scheduler and a subtask's phases), supervision,
budgets, pre-flight, nested plans, the live view and drafting a plan."""
