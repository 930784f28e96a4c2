"""Byte rules every other layer builds on: strict JSON, digests and atomic publication.

Nothing here touches the network or imports from a higher layer.
"""
