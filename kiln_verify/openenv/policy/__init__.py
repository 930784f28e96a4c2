"""Behaviour policies for rollout collection (docs/policies.md).

Import from the submodules: ``base`` (the :class:`~kiln_verify.openenv.policy.base.Policy`
protocol, request/response/provenance types and ``generation_seed``), ``scripted``,
``random_policy``, ``openai_compat``, ``transformers_policy`` and ``registry``. This module
stays empty so that importing a policy never imports httpx, torch or transformers needlessly.
"""
