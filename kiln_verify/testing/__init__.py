"""Builders the test suite, the benchmarks and the qualification workloads share.

==============  ===========================================================================
module          job
==============  ===========================================================================
``tiny_model``  the tiny random Qwen3.5 model and its tokenizer; warm-starting it
``lora``        a random LoRA adapter for it
``bundles``     synthetic, fully consistent OpenEnv rollout bundles (scripted episodes)
``serve``       ``kiln-verify serve`` as a real child process, and its ready line
``browser``     headless Chromium over the DevTools protocol (pages, probes, screenshots)
==============  ===========================================================================

Live oracle servers are the pytest plugin's own ``openenv_oracle`` fixture
(:mod:`pytest_kiln.fixtures`), which the test suite uses too.

Product code: nothing here imports ``tests`` (the import contract in ``pyproject.toml``
checks it); the heavy ML stack is imported lazily.
"""
