"""The OpenEnv wire protocol and client: the layer below the records and the engines.

Sans-I/O codec (``wire``), URLs and credentials, reflection of declared schemas, identity
and discovery, the action schema, sessions, the HTTP/WebSocket client and the Task API.
Import from the submodules; this package module stays empty so that importing the codec
never imports httpx or websockets.
"""
