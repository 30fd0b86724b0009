"""koord runtime-proxy (Koordinator's ``pkg/runtimeproxy``): a CRI proxy in front of the container runtime.

It serves the CRI RuntimeService and ImageService on its own unix socket and forwards every call to the
runtime's socket. Methods it does not intercept pass through as raw bytes; for the calls Koordinator
intercepts it asks the runtime hook servers registered in the hook config directory (the koordlet) before
and after, and merges their answers into the request. Modules:

* ``proto``: the CRI ``runtime.v1`` subset (generated, ``make protos``);
* ``config``: the hook-server registrations (``/etc/runtime/hookserver.d/*.json``);
* ``store``: the pod and container metadata the container calls need;
* ``executor``: CRI request <-> hook request, and the merge of a hook response;
* ``dispatcher``: which hook server is called for which call, with its failure policy and timeout;
* ``server``: the gRPC server, the raw passthrough and the interception;
* ``component``: the ``ComponentRunner`` component behind ``koord runtime-proxy``.
"""
