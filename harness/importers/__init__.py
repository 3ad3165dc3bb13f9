"""What turns other formats into harness's: Agentfiles, Glee workflows, agent files, and the
scaffolds `init` and `demo` write."""
