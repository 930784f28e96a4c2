"""Builders the test suite, the benchmarks and the qualification workloads share.

==============  ===========================================================================
module          job
==============  ===========================================================================
``tiny_model``  the tiny random Qwen3.5 model and its tokenizer; warm-starting it
``lora``        a random LoRA adapter for it
==============  ===========================================================================

Product code: nothing here imports ``tests``; the heavy ML stack is imported lazily.
"""
