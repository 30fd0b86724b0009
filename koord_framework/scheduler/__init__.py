"""The scheduling framework: kube-scheduler's extension points, a profile runner, queue, cache and binder."""
