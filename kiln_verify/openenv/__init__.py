"""OpenEnv: the protocol and client (``protocol``), the records, and the engines built on
them (``collect``, ``replay``, ``verify``, ``evaluate``) with the policies they drive.

This package module stays empty so that importing the Sans-I/O codec
(``kiln_verify.openenv.protocol.wire``) never imports httpx or websockets.
"""
