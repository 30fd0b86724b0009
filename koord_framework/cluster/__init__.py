"""The cluster port and its adapters: ``MemoryCluster`` (embedded, the default) and ``KubeCluster`` (real)."""
