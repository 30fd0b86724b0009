"""kube-scheduler in-tree plugins for koord."""
