"""Training admission and a train run's typed status sections: Kiln's GRPO configuration,
the preflight, the sealed contract, the trainer's and the evaluation's status.

One module per job (docs/training-admission.md); this ``__init__`` imports nothing, so
``kiln_verify.control.status`` can read the contract and the two typed status sections
without loading admission:

=====================  =====================================================================
module                 job
=====================  =====================================================================
``grpo_config``        Kiln's ``GrpoConfig`` and its parts, Kiln's defaults
``records``            the preflight request and receipt, capacity, the training contract
``effective``          the one table: ``GrpoConfig`` field -> TRL ``GRPOConfig`` /
                       ``train.py`` option / refused; ``train.py``'s options for an
                       admitted configuration
``rules``              the request rules (adapters, ``post_eval``, ``environment_eval`` seeds)
``preflight``          admission itself: receipt or typed refusal; who plays the behaviour
                       adapter
``seal``               the contract sealed into a train run's first ``run.json``
``trainer_status``     Kiln's ``OpenEnvTrainingStatus``: a train run's ``training`` section
``evaluation_status``  Kiln's ``OpenEnvEnvironmentEvalStatus``: its ``environment_evaluation``
=====================  =====================================================================
"""
