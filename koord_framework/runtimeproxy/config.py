"""Hook-server registrations: Koordinator's ``/etc/runtime/hookserver.d/*.json`` (``runtimeproxy/config``).

A hook server (the koordlet) registers itself by writing one JSON file into the directory::

    {"remote-endpoint": "/var/run/koordlet/koordlet.sock",
     "failure-policy": "Ignore",
     "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreStartContainer", ...]}

The proxy re-reads the directory at most every ``rescan_interval`` seconds (Koordinator watches it with
fsnotify and rescans every minute): a new, changed or removed file takes effect on the next CRI call after
that. A file that does not parse is skipped with a warning naming the file and the field, and so is a hook
name the proxy does not know; the other entries of the file still count.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from koord_framework.koordlet.runtimehooks.protocol import FailurePolicy, Stage

__all__ = [
    "DEFAULT_HOOK_CONFIG_DIR",
    "HookConfigDir",
    "HookServerConfig",
    "RequestPath",
    "parse_hook_server_config",
]

log = logging.getLogger(__name__)

DEFAULT_HOOK_CONFIG_DIR = "/etc/runtime/hookserver.d"


class RequestPath(StrEnum):
    """Koordinator's ``RuntimeRequestPath``: the CRI calls the proxy intercepts."""

    RUN_POD_SANDBOX = "RunPodSandbox"
    STOP_POD_SANDBOX = "StopPodSandbox"
    CREATE_CONTAINER = "CreateContainer"
    START_CONTAINER = "StartContainer"
    UPDATE_CONTAINER_RESOURCES = "UpdateContainerResources"
    STOP_CONTAINER = "StopContainer"


# Koordinator's ``RuntimeHookType.OccursOn``: the stage each hook type serves. PreRemoveRunPodSandbox occurs
# on no path (the proxy never calls it; the koordlet's NRI and reconciler modes use it).
_STAGE_PATH: dict[Stage, RequestPath] = {
    Stage.PRE_RUN_POD_SANDBOX: RequestPath.RUN_POD_SANDBOX,
    Stage.POST_STOP_POD_SANDBOX: RequestPath.STOP_POD_SANDBOX,
    Stage.PRE_CREATE_CONTAINER: RequestPath.CREATE_CONTAINER,
    Stage.PRE_START_CONTAINER: RequestPath.START_CONTAINER,
    Stage.POST_START_CONTAINER: RequestPath.START_CONTAINER,
    Stage.PRE_UPDATE_CONTAINER_RESOURCES: RequestPath.UPDATE_CONTAINER_RESOURCES,
    Stage.POST_STOP_CONTAINER: RequestPath.STOP_CONTAINER,
}


def occurs_on(stage: Stage, path: RequestPath) -> bool:
    return _STAGE_PATH.get(stage) is path


def is_pre(stage: Stage) -> bool:
    """Koordinator's ``HookStage``: ``Pre*`` hooks run before the runtime call, ``Post*`` after."""
    return stage.value.startswith("Pre")


@dataclass(frozen=True, slots=True)
class HookServerConfig:
    """One registration file (Koordinator's ``RuntimeHookConfig``)."""

    source: str
    """The file it came from (named in errors)."""
    remote_endpoint: str
    failure_policy: FailurePolicy
    runtime_hooks: tuple[Stage, ...]

    def stages_on(self, path: RequestPath, *, pre: bool) -> list[Stage]:
        return [s for s in self.runtime_hooks if occurs_on(s, path) and is_pre(s) == pre]


def parse_hook_server_config(data: Any, source: str) -> HookServerConfig:
    """Validate one registration (already JSON-decoded); raises ``ValueError`` naming the file and field.

    Unknown hook names are dropped with a warning (Koordinator keeps them and never matches them)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a hook server config must be a JSON object, not {type(data).__name__}")
    endpoint = data.get("remote-endpoint", "")
    if not isinstance(endpoint, str) or not endpoint:
        raise ValueError(f"{source}: remote-endpoint must be a non-empty string (the hook server's socket)")
    raw_policy = data.get("failure-policy", "")
    try:
        policy = FailurePolicy(raw_policy)
    except ValueError:
        raise ValueError(
            f"{source}: failure-policy {raw_policy!r} is not one of 'Fail', 'Ignore' or ''"
        ) from None
    raw_hooks = data.get("runtime-hooks", [])
    if not isinstance(raw_hooks, list):
        raise ValueError(f"{source}: runtime-hooks must be a list of hook names")
    stages: list[Stage] = []
    for name in raw_hooks:
        try:
            stages.append(Stage(name))
        except ValueError:
            log.warning(
                "%s: runtime-hooks: unknown hook %r ignored (known: %s)",
                source,
                name,
                ", ".join(s.value for s in Stage),
            )
    return HookServerConfig(source, endpoint, policy, tuple(stages))


@dataclass(slots=True)
class _Entry:
    stamp: tuple[int, int, int]
    config: HookServerConfig | None


class HookConfigDir:
    """The registrations of one directory, re-read lazily. Thread-safe."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        rescan_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self.rescan_interval = rescan_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._scanned_at: float | None = None

    def servers(self) -> list[HookServerConfig]:
        """The valid registrations, by file name."""
        with self._lock:
            now = self._clock()
            if self._scanned_at is None or now - self._scanned_at >= self.rescan_interval:
                self._scan()
                self._scanned_at = now
            return [e.config for _n, e in sorted(self._entries.items()) if e.config is not None]

    def refresh(self) -> list[HookServerConfig]:
        """Re-read now (tests, and the first call)."""
        with self._lock:
            self._scanned_at = None
        return self.servers()

    def _scan(self) -> None:
        try:
            names = [n for n in os.listdir(self.directory) if n.endswith("json")]
        except FileNotFoundError:
            names = []
        except OSError as exc:
            log.warning("hook config dir %s: %s", self.directory, exc)
            return
        seen: set[str] = set()
        for name in names:
            path = self.directory / name
            try:
                st = path.stat()
            except OSError:
                continue
            if not path.is_file():
                continue
            seen.add(name)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            old = self._entries.get(name)
            if old is not None and old.stamp == stamp:
                continue
            self._entries[name] = _Entry(stamp, self._load(path))
        for gone in set(self._entries) - seen:
            log.info("hook server config %s removed", self.directory / gone)
            del self._entries[gone]

    @staticmethod
    def _load(path: Path) -> HookServerConfig | None:
        try:
            data = json.loads(path.read_text())
            config = parse_hook_server_config(data, str(path))
        except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
            log.warning("hook server config %s skipped: %s", path, exc)
            return None
        log.info(
            "hook server config %s: %s, failure-policy %r, hooks %s",
            path,
            config.remote_endpoint,
            config.failure_policy.value,
            [s.value for s in config.runtime_hooks],
        )
        return config
