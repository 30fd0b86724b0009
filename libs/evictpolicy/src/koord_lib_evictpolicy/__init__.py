"""The BE threshold-eviction policy the koordlet's CPU and memory eviction strategies share
(``evict_policy``).

A family library (ADR 0005): plugins may import it, it imports only the public plugin API and no plugin.
"""
