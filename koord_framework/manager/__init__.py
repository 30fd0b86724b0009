"""koord-manager: the SLO controllers (NodeSLO, NodeMetric, node resources) on the shared informer."""
