"""Node selectors evaluated over every table row at once, with the same answers as ``selectors``."""

from __future__ import annotations

import numpy as np

from koord_framework.api.selectors import (
    OBJECT_NAME_FIELD,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    RequiredNodeAffinity,
    Requirement,
)
from koord_framework.scheduler.table import BoolArray, Int64Array
from koord_plugin_kubernetes._nodeindex import NodeAttributeIndex


def requirement_mask(index: NodeAttributeIndex, req: Requirement) -> BoolArray:
    n = index.size
    op = req.operator
    if op in ("In", "Equals", "NotIn", "NotEquals"):
        hit = np.zeros(n, dtype=np.bool_)
        for v in req.values:
            hit |= index.value_mask(req.key, v)
        return hit if op in ("In", "Equals") else ~hit
    if op == "Exists":
        return index.key_mask(req.key).copy()
    if op == "DoesNotExist":
        return ~index.key_mask(req.key)
    has, vals = index.int_values(req.key)
    return has & ((vals > req.number) if op == "Gt" else (vals < req.number))


def label_selector_mask(index: NodeAttributeIndex, sel: LabelSelector) -> BoolArray:
    if sel.nothing:
        return np.zeros(index.size, dtype=np.bool_)
    out = np.ones(index.size, dtype=np.bool_)
    for r in sel.requirements:
        out &= requirement_mask(index, r)
    return out


def term_mask(index: NodeAttributeIndex, term: NodeSelectorTerm) -> BoolArray:
    if term.error is not None:
        return np.zeros(index.size, dtype=np.bool_)
    out = np.ones(index.size, dtype=np.bool_)
    if term.match_labels is not None:
        out &= label_selector_mask(index, term.match_labels)
    if term.match_fields is not None:
        for f in term.match_fields:
            if f.key == OBJECT_NAME_FIELD:
                same = index.name_mask(f.value)
            else:  # any other field reads as "" on a node
                same = np.full(index.size, f.value == "", dtype=np.bool_)
            out &= same if f.equal else ~same
    return out


def node_selector_mask(index: NodeAttributeIndex, sel: NodeSelector) -> BoolArray:
    out = np.zeros(index.size, dtype=np.bool_)
    for t in sel.terms:
        out |= term_mask(index, t)
    return out


def required_affinity_mask(index: NodeAttributeIndex, aff: RequiredNodeAffinity) -> BoolArray:
    out = np.ones(index.size, dtype=np.bool_)
    if aff.label_selector is not None:
        out &= label_selector_mask(index, aff.label_selector)
    if aff.node_selector is not None:
        out &= node_selector_mask(index, aff.node_selector)
    return out


def take(mask: BoolArray, rows: Int64Array) -> BoolArray:
    """``mask[rows]``, with rows beyond the index (a node added since the last refresh) reading False."""
    if rows.size and int(rows.max()) >= mask.shape[0]:
        out = np.zeros(rows.shape[0], dtype=np.bool_)
        ok = rows < mask.shape[0]
        out[ok] = mask[rows[ok]]
        return out
    return mask[rows]
