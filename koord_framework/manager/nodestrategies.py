"""``NodeStrategies[S]``: an ``slo-controller-config`` key's strategy per node (Koordinator's ``sloconfig``).

Every key of the ConfigMap has the same shape: a cluster strategy (inline, or under ``clusterStrategy``) and
a list of node strategies (``nodeConfigs`` or ``nodeStrategies``), each a ``name``, a ``nodeSelector`` and
the strategy's own fields. The cluster strategy is merged over the key's defaults, each node strategy over
the cluster strategy (Koordinator's ``util.MergeCfg``: what the node strategy leaves out is kept), and a
node takes the first node strategy whose selector matches its labels, else the cluster strategy
(``GetNodeColocationStrategy``, ``GetStrategyCopy``, the NodeSLO controller's ``get*Strategy``). A selector
is ``metav1.LabelSelectorAsSelector``'s: a missing one matches no node, an empty one every node.

The strategy type is the caller's (a pydantic model, or the JSON form as a dict) and so is the merge, since
keys differ in which maps merge entry by entry. Parsing is all or nothing: a bad selector or a bad strategy
raises ``ValueError`` naming the field, and the caller keeps its last good value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Self, TypeVar

from pydantic import BaseModel, create_model

from koord_framework.api.selectors import LabelSelector, parse_label_selector

__all__ = ["NODE_CONFIG_KEYS", "NodeStrategies", "strategy_fields"]

S = TypeVar("S")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

NODE_CONFIG_KEYS: Final = ("name", "nodeSelector")
"""The fields of a node strategy entry that are not the strategy's."""


def strategy_fields(data: Mapping[str, Any], keys: tuple[str, ...] = NODE_CONFIG_KEYS) -> dict[str, Any]:
    """``data`` without ``keys``: a node strategy entry's (or the inline cluster strategy's) own fields."""
    return {k: v for k, v in data.items() if k not in keys}


@dataclass(frozen=True)
class NodeStrategies(Generic[S]):
    """A key's cluster strategy (merged over the defaults) and its node strategies (each merged over the
    cluster strategy) with their selectors, in the ConfigMap's order."""

    cluster: S
    nodes: tuple[tuple[LabelSelector, S], ...] = ()

    @classmethod
    def parse(
        cls,
        data: Mapping[str, Any],
        *,
        default: S,
        read: Callable[[Any], S],
        merge: Callable[[S, S], S],
        nodes_key: str = "nodeConfigs",
        cluster_key: str | None = None,
        read_node: Callable[[Any], tuple[Any, S]] | None = None,
    ) -> Self:
        """Parse a key's JSON. The cluster strategy is ``data[cluster_key]`` or, without a ``cluster_key``,
        ``data`` itself less ``nodes_key``; ``read`` turns a strategy's fields into ``S``. ``read_node``
        turns a whole node entry into its selector and strategy (default: the ``nodeSelector`` field and
        ``read`` of the rest). Raises ``ValueError`` naming the field."""
        if cluster_key is None:
            # not a mapping: ``read`` reports it in its own words
            cluster_data: Any = strategy_fields(data, (nodes_key,)) if isinstance(data, Mapping) else data
        else:
            cluster_data = data.get(cluster_key) or {}
        cluster = merge(default, read(cluster_data))
        nodes = []
        for i, raw in enumerate(data.get(nodes_key) or ()):
            if read_node is None:
                if not isinstance(raw, Mapping):
                    raise ValueError(f"{nodes_key}[{i}]: must be an object, not {type(raw).__name__}")
                selector_data, strategy = raw.get("nodeSelector"), read(strategy_fields(raw))
            else:
                selector_data, strategy = read_node(raw)
            selector = parse_label_selector(selector_data, f"{nodes_key}[{i}].nodeSelector")
            nodes.append((selector, merge(cluster, strategy)))
        return cls(cluster=cluster, nodes=tuple(nodes))

    @classmethod
    def parse_models(
        cls,
        data: Mapping[str, Any],
        *,
        default: S,
        merge: Callable[[S, S], S],
        nodes_key: str = "nodeConfigs",
    ) -> Self:
        """``parse`` for a pydantic strategy model (``type(default)``) whose JSON keeps the cluster
        strategy inline: each node entry is validated as the model plus ``name`` and ``nodeSelector``, so
        that a bad field is reported once, whichever it is."""
        if not isinstance(default, BaseModel):
            raise TypeError(f"parse_models needs a pydantic model default, not {type(default).__name__}")
        model = type(default)
        node_model = _node_config_model(model)

        def read_node(raw: Any) -> tuple[Any, S]:
            node = node_model.model_validate(raw)
            strategy = model.model_validate(node.model_dump(exclude={"name", "node_selector"}))
            return getattr(node, "node_selector"), strategy  # noqa: B009 -- a field of the built model

        read: Callable[[Any], S] = model.model_validate
        return cls.parse(
            data, default=default, read=read, merge=merge, nodes_key=nodes_key, read_node=read_node
        )

    def index_for(self, labels: Mapping[str, str]) -> int:
        """The index of the first node strategy whose selector matches ``labels``; -1 for none."""
        for i, (selector, _strategy) in enumerate(self.nodes):
            if selector.matches(labels):
                return i
        return -1

    def strategy_for(self, labels: Mapping[str, str]) -> S:
        """The node's strategy: the first matching node strategy, else the cluster strategy. Shared by
        every node that matches the same entry: read-only."""
        index = self.index_for(labels)
        return self.cluster if index < 0 else self.nodes[index][1]

    def map(self, convert: Callable[[S, int], T]) -> NodeStrategies[T]:
        """The same selectors with every strategy converted (``convert(strategy, index)``, index -1 for the
        cluster strategy, so that a conversion error can name the entry)."""
        return NodeStrategies(
            cluster=convert(self.cluster, -1),
            nodes=tuple(
                (selector, convert(strategy, i)) for i, (selector, strategy) in enumerate(self.nodes)
            ),
        )


@functools.cache
def _node_config_model(model: type[BaseModel]) -> type[BaseModel]:
    """The node entry's model: the strategy's fields plus ``name`` and ``nodeSelector`` (same config)."""
    node_model: type[BaseModel] = create_model(
        "_NodeConfig",
        __base__=model,
        name=(str, ""),
        node_selector=(dict[str, Any] | None, None),
    )
    return node_model
