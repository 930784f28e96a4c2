"""Interoperability with the OpenEnv reference package (`openenv` 0.10.0) as a real peer."""
