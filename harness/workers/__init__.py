"""Worker programs that speak the harness protocol, started through launchers in agents/
(their text: harness/boundary/launchers.py)."""
