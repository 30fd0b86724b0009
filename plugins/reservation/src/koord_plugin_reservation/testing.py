"""Builders for tests of Reservation-aware code: Reservation manifests and random clusters with them."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from koord_framework.testing import make_node, make_pod


def make_reservation(
    name: str,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    *,
    owners: list[dict[str, Any]] | None = None,
    owner_labels: Mapping[str, str] | None = None,
    node: str | None = None,
    template_node: str | None = None,
    ttl: str | None = "1h",
    expires: str | None = None,
    allocate_once: bool | None = None,
    allocate_policy: str | None = None,
    labels: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
    unschedulable: bool | None = None,
    taints: list[dict[str, Any]] | None = None,
    extra_requests: Mapping[str, str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Reservation; ``node`` makes it Available there (status as the scheduler's Bind writes it)."""
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra_requests or {})
    tspec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if scheduler_name:
        tspec["schedulerName"] = scheduler_name
    if template_node:
        tspec["nodeName"] = template_node
    spec: dict[str, Any] = {
        "template": {"spec": tspec},
        "owners": owners
        if owners is not None
        else [{"labelSelector": {"matchLabels": dict(owner_labels or {"app": name})}}],
    }
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = expires
    if allocate_once is not None:
        spec["allocateOnce"] = allocate_once
    if allocate_policy is not None:
        spec["allocatePolicy"] = allocate_policy
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    if taints is not None:
        spec["taints"] = taints
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": uid or f"uid-{name}"},
        "spec": spec,
    }
    if labels:
        obj["metadata"]["labels"] = dict(labels)
    if node is not None:
        obj["status"] = {
            "phase": "Available",
            "nodeName": node,
            "allocatable": dict(requests),
            "conditions": [
                {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
                {"type": "Ready", "status": "True", "reason": "Available"},
            ],
        }
    return obj


def random_reservation_cluster(
    rng: random.Random,
    *,
    owners: int = 3,
    scheduler_name: str | None = None,
    with_affinity: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes with bound pods, Available and Pending reservations for ``owners`` owner groups (``team=tN``),
    and pending pods of which about half belong to an owner group (with ``with_affinity``, some pinned to
    a reservation by name), and a few that ignore reservations."""
    objects: list[dict[str, Any]] = []
    nodes = [f"node-{i}" for i in range(rng.randint(3, 7))]
    for n in nodes:
        objects.append(make_node(n, cpu=str(rng.choice([4, 8, 16])), memory=f"{rng.choice([8, 16, 32])}Gi"))
        for j in range(rng.randint(0, 2)):
            objects.append(make_pod(f"bound-{n}-{j}", cpu=rng.choice(["500m", "1"]), memory="512Mi", node=n))
    names: list[str] = []
    for k in range(rng.randint(1, 6)):
        name = f"r{k}"
        names.append(name)
        team = f"t{rng.randrange(owners)}"
        objects.append(
            make_reservation(
                name,
                cpu=rng.choice(["1", "2", "3"]),
                memory=rng.choice(["1Gi", "2Gi"]),
                owner_labels={"team": team},
                node=rng.choice(nodes) if rng.random() < 0.6 else None,
                allocate_once=rng.choice([None, False]),
                allocate_policy=rng.choice([None, None, "Aligned", "Restricted"]),
                labels={"scheduling.koordinator.sh/reservation-order": str(rng.randint(1, 3))}
                if rng.random() < 0.3
                else None,
                scheduler_name=scheduler_name,
            )
        )
    pending: list[dict[str, Any]] = []
    for i in range(rng.randint(4, 10)):
        labels: dict[str, str] = {}
        annotations: dict[str, str] = {}
        if rng.random() < 0.5:
            labels["team"] = f"t{rng.randrange(owners)}"
            if with_affinity and rng.random() < 0.2 and names:
                annotations["scheduling.koordinator.sh/reservation-affinity"] = (
                    '{"name": "' + rng.choice(names) + '"}'
                )
        elif rng.random() < 0.1:
            labels["scheduling.koordinator.sh/reservation-ignored"] = "true"
        pending.append(
            make_pod(
                f"p{i}",
                cpu=rng.choice(["500m", "1", "2"]),
                memory=rng.choice(["256Mi", "1Gi"]),
                labels=labels or None,
                annotations=annotations or None,
                scheduler_name=scheduler_name,
            )
        )
    return objects, pending


__all__ = ["make_reservation", "random_reservation_cluster"]
