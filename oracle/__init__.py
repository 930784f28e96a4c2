"""The kiln-verify conformance oracle: small deterministic OpenEnv servers.

See `oracle/README.md` for the inventory, the game rules and the fault profiles.
"""
