"""kiln-verify: conformance and verification for OpenEnv rollouts and the HF/TRL hand-off."""

__version__ = "0.1.0"
