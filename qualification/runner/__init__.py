"""The qualification runner, split by job; ``qualification/run.py`` is only its entry point.

Standard library plus ``jsonschema`` only, so the runner works under any ``python3`` that has
jsonschema, even where kiln-verify itself is not installed (the steps choose their own
interpreter through workload variables).
"""
