"""The control-plane server front end (FastAPI on uvicorn) over :mod:`kiln_verify.control`.

==============  ===========================================================================
module          job
==============  ===========================================================================
``app``         :func:`create_app`: assembles the lifespan (the registry over the served
                run kinds), the error answers and the route families
``routes``      one router module per route family: ``runs``, ``artifacts``,
                ``discovery`` (inspection and tasks), ``metrics`` (and ``/health``)
``responses``   exact JSON bytes, typed error bodies, the verified-descriptor stream
``limits``      the 1 MiB request body bound (pure ASGI middleware)
``openapi``     route documentation and request schemas from the pydantic records
``runner``      uvicorn in the foreground (``kiln-verify serve``) or in a thread
==============  ===========================================================================
"""
