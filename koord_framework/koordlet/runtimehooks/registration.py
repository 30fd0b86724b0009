"""The hook server registration file koord-runtime-proxy discovers (Koordinator's ``RuntimeHookConfig``).

A hook server announces itself by writing one JSON file into the proxy's config dir
(``/etc/runtime/hookserver.d``; the koordlet's ``--runtime-hooks-config-path``, inside its pod
``/host-etc-hookserver/``); the proxy reads every ``*.json`` file there and calls, for each CRI call, the
first server whose ``runtime-hooks`` list a stage of that call. The koordlet writes ``koordlet.json``::

    {
        "remote-endpoint": "/var/run/koordlet/koordlet.sock",
        "failure-policy": "Ignore",
        "runtime-hooks": ["PreRunPodSandbox", "PostStopPodSandbox", "PreCreateContainer", ...]
    }

Field names, the ``omitempty`` behaviour (an empty field is left out) and the file name are Koordinator's.
``remote-endpoint`` is the socket path as the *proxy* sees it on the host (the koordlet may listen on
another path inside its container: ``--runtime-hooks-addr`` vs ``--runtime-hooks-host-endpoint``).
``failure-policy`` is what the proxy does when the call fails (``Fail``: the CRI call fails with the
server's message; ``Ignore`` or empty: the original request goes to the runtime unchanged).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy, Stage

__all__ = [
    "DEFAULT_CONFIG_DIR",
    "REGISTRATION_FILE",
    "HookServerRegistration",
    "read_registrations",
    "served_stages",
]

DEFAULT_CONFIG_DIR = "/etc/runtime/hookserver.d"
"""koord-runtime-proxy's ``defaultRuntimeHookConfigPath``."""
REGISTRATION_FILE = "koordlet.json"

# The stages a hook server can serve over RuntimeHookService, in Koordinator's ``hooks.GetStages`` order
# (PreRemoveRunPodSandbox has no rpc: the koordlet only serves it through NRI).
_RPC_STAGES = (
    Stage.PRE_RUN_POD_SANDBOX,
    Stage.POST_STOP_POD_SANDBOX,
    Stage.PRE_CREATE_CONTAINER,
    Stage.PRE_START_CONTAINER,
    Stage.POST_START_CONTAINER,
    Stage.PRE_UPDATE_CONTAINER_RESOURCES,
    Stage.POST_STOP_CONTAINER,
)


def served_stages(disabled: Iterable[str] = ()) -> list[str]:
    """The stages the server registers: every rpc stage except the ``--runtime-hooks-disable-stages``.
    An unknown name in ``disabled`` is an error naming it (a typo would otherwise disable nothing)."""
    names = {s.value for s in Stage}
    off = set(disabled)
    unknown = sorted(off - names)
    if unknown:
        raise ValueError(
            f"runtime hook stage(s) {', '.join(unknown)} unknown; stages: {', '.join(sorted(names))}"
        )
    return [s.value for s in _RPC_STAGES if s.value not in off]


@dataclass(frozen=True, slots=True)
class HookServerRegistration:
    """One ``hookserver.d/*.json`` file."""

    remote_endpoint: str
    failure_policy: FailurePolicy = FailurePolicy.IGNORE
    runtime_hooks: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        doc: dict[str, object] = {}
        if self.remote_endpoint:
            doc["remote-endpoint"] = self.remote_endpoint
        if self.failure_policy.value:
            doc["failure-policy"] = self.failure_policy.value
        if self.runtime_hooks:
            doc["runtime-hooks"] = list(self.runtime_hooks)
        return json.dumps(doc, indent="\t")

    @classmethod
    def from_json(cls, text: str, source: str = "<registration>") -> HookServerRegistration:
        """Parse one file; unknown fields are ignored and a wrong type is an error naming the field, as Go's
        ``json.Unmarshal`` does. An unknown hook type or failure policy is kept out with an error."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{source}: not JSON: {err}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{source}: must be a JSON object")
        endpoint = doc.get("remote-endpoint", "")
        policy = doc.get("failure-policy", "")
        hooks = doc.get("runtime-hooks", [])
        if not isinstance(endpoint, str):
            raise ValueError(f"{source}: remote-endpoint must be a string")
        if policy not in {p.value for p in FailurePolicy}:
            raise ValueError(f"{source}: failure-policy must be Fail, Ignore or empty, got {policy!r}")
        if not isinstance(hooks, list) or not all(isinstance(h, str) for h in hooks):
            raise ValueError(f"{source}: runtime-hooks must be a list of strings")
        return cls(endpoint, FailurePolicy(policy), tuple(hooks))

    def write(self, config_dir: str | Path, name: str = REGISTRATION_FILE) -> Path:
        """Write atomically (a proxy watching the dir never reads half a file)."""
        directory = Path(config_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(self.to_json())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def read_registrations(config_dir: str | Path) -> dict[Path, HookServerRegistration | ValueError]:
    """Every ``*.json`` file of the dir (sub-dirs skipped, as the proxy does), parsed or with its error."""
    out: dict[Path, HookServerRegistration | ValueError] = {}
    directory = Path(config_dir)
    if not directory.is_dir():
        return out
    for path in sorted(directory.iterdir()):
        if path.is_dir() or not path.name.endswith("json"):
            continue
        try:
            out[path] = HookServerRegistration.from_json(path.read_text(), str(path))
        except (OSError, ValueError) as err:
            out[path] = err if isinstance(err, ValueError) else ValueError(f"{path}: {err}")
    return out
