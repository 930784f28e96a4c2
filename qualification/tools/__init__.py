"""Small step programs the qualification workloads call (each one a script run by path)."""
