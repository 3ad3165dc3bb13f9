"""Running a task: the scheduler (orchestrator) and a subtask's phases (phases, each in its
own module), supervision, budgets, pre-flight, nested plans, the live view and drafting a plan."""
