"""Koordinator's GroupIdentity runtime hook (bvt)."""

from koord_plugin_groupidentity.plugin import GroupIdentity, GroupIdentityArgs
from koord_plugin_groupidentity.rule import BvtRule, parse_rule

__all__ = ["BvtRule", "GroupIdentity", "GroupIdentityArgs", "parse_rule"]
