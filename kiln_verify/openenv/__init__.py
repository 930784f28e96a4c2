"""The OpenEnv client: Sans-I/O wire codec, discovery and identity, sessions, Task API.

Import from the submodules (``wire``, ``urls``, ``credentials``, ``identity``,
``action_schema``, ``session``, ``client``, ``tasks``); this package module stays empty
so that importing the Sans-I/O codec never imports httpx or websockets.
"""
