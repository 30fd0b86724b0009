"""Kubernetes and Koordinator API values: quantities, resource lists, QoS and priority classes."""
