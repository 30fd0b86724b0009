"""DeviceShare's section of ``koord explain node``: each device of the node's Device object (type, minor,
health), what is free on it (gpu-core, gpu-memory, ...) against its total, its free virtual functions,
and which pods hold it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koord_framework.explain.hooks import ExplainSection

if TYPE_CHECKING:
    from koord_plugin_deviceshare.plugin import DeviceShare

TITLE = "DeviceShare"


def _res(values: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(dict(values or {}).items())) or "-"


def explain_node(plugin: DeviceShare, node_name: str) -> ExplainSection:
    with plugin._lock:
        error = plugin.device_errors.get(node_name)
        nd = plugin.nodes.get(node_name)
        if error:
            return ExplainSection(TITLE, [f"Device object unusable: {error}"], {"error": error})
        if nd is None or not nd.device_infos:
            return ExplainSection(TITLE, ["no Device object: no device on this node"], {"devices": []})
        devices: list[dict[str, Any]] = []
        lines: list[str] = []
        for device_type, infos in sorted(nd.device_infos.items()):
            holders: dict[int, list[str]] = {}
            for pod_key, held in nd.allocate_set.get(device_type, {}).items():
                for minor in held:
                    holders.setdefault(int(minor), []).append(pod_key)
            used_vfs = nd.vf_allocations.get(device_type, {})
            for info in sorted(infos, key=lambda i: i.minor):
                free = dict(nd.free.get(device_type, {}).get(info.minor, {}))
                total = dict(nd.total.get(device_type, {}).get(info.minor, {}))
                vfs = [vf.bus_id for group in info.vf_groups for vf in group.vfs]
                busy = used_vfs.get(info.minor, set())
                free_vfs = [bus for bus in vfs if bus not in busy]
                pods = sorted(holders.get(info.minor, []))
                entry: dict[str, Any] = {
                    "type": device_type,
                    "minor": info.minor,
                    "uuid": info.uuid,
                    "healthy": info.health,
                    "free": free,
                    "total": total,
                    "pods": pods,
                }
                if vfs:
                    entry["vfs"] = {"total": len(vfs), "free": len(free_vfs)}
                devices.append(entry)
                line = f"{device_type} {info.minor}{'' if info.health else ' (UNHEALTHY)'}: free {_res(free)}"
                line += f" of {_res(total)}"
                if vfs:
                    line += f"; VFs {len(free_vfs)}/{len(vfs)} free"
                if pods:
                    line += f"; held by {', '.join(pods)}"
                lines.append(line)
    return ExplainSection(TITLE, lines, {"devices": devices})
