"""A real API server as a snapshot's source: list each kind in pages (``limit``/``continue``), get by name.

Only the transport of the Kubernetes adapter is used (no watches, no event recorder): a snapshot reads and
never writes. A page is handed on as soon as it arrives, so at most one page per kind is held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from koord_framework.cluster.kinds import KindInfo
from koord_framework.errors import ClusterError, NotFoundError

__all__ = ["KubeSource", "SnapshotSource", "Unreachable"]

Obj = dict[str, Any]


class Unreachable(ClusterError):
    """The API server did not answer at all: nothing can be dumped."""


class SnapshotSource(Protocol):
    """What ``take_snapshot`` reads from."""

    def describe(self) -> str:
        """Where the objects come from (the server's URL)."""
        ...

    def check(self) -> None:
        """Raise ``Unreachable`` (or ``ClusterError``) when the source cannot be read at all."""
        ...

    def serves(self, kind: str) -> bool: ...

    def api_version(self, kind: str) -> str:
        """The apiVersion the kind is served as (objects are written with it)."""
        ...

    def pages(self, kind: str, page_size: int) -> Iterator[list[Obj]]:
        """Every object of ``kind`` in every namespace, page by page; ``ExpiredError`` when the continue
        token expired (the caller starts the kind again)."""
        ...

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """One object, None when it does not exist."""
        ...


class KubeSource:
    """``SnapshotSource`` on an API server, through the adapter's ``Transport``."""

    def __init__(
        self, transport: Any, kinds: Mapping[str, KindInfo], *, kubeconfig: str | None = None
    ) -> None:
        self.transport = transport
        transport.kinds = kinds
        self.kubeconfig = kubeconfig

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None,
        kinds: Mapping[str, KindInfo],
        *,
        context: str | None = None,
        request_timeout: float = 30.0,
        qps: float = 50.0,
        burst: int = 100,
    ) -> KubeSource:
        from koord_framework.cluster.kube.transport import Transport

        transport = Transport.from_kubeconfig(
            kubeconfig,
            context=context,
            qps=qps,
            burst=burst,
            max_connections=4,
            request_timeout=request_timeout,
            user_agent="koord-snapshot",
        )
        return cls(transport, kinds, kubeconfig=kubeconfig)

    def close(self) -> None:
        self.transport.close()

    def describe(self) -> str:
        return str(self.transport.host)

    def _fatal(self, err: Exception) -> Exception:
        from koord_framework.cluster.kube.errors import KubeApiError

        if isinstance(err, KubeApiError) and err.status == 0:
            where = f" (kubeconfig {self.kubeconfig})" if self.kubeconfig else ""
            return Unreachable(f"cannot reach the API server {self.describe()}{where}: {err}")
        return err

    def check(self) -> None:
        try:
            self.transport.request("GET", "/version", "get the server's version")
        except ClusterError as err:
            raise self._fatal(err) from None

    def serves(self, kind: str) -> bool:
        try:
            return bool(self.transport.serves(kind))
        except ClusterError as err:
            raise self._fatal(err) from None

    def api_version(self, kind: str) -> str:
        return str(self.transport.resource(kind).api_version)

    def pages(self, kind: str, page_size: int) -> Iterator[list[Obj]]:
        resource = self.transport.resource(kind)
        what = f"list {resource.plural}"
        cont: str | None = None
        while True:
            query: dict[str, Any] = {"limit": page_size} if page_size > 0 else {}
            if cont:
                query["continue"] = cont
            try:
                doc = self.transport.request("GET", resource.path(), what, query=query)
            except ClusterError as err:
                raise self._fatal(err) from None
            items = doc.get("items") or []
            cont = (doc.get("metadata") or {}).get("continue") or None
            del doc
            yield items
            if not cont:
                return

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        resource = self.transport.resource(kind)
        try:
            obj = self.transport.request(
                "GET", resource.path(namespace, name), f"get {resource.plural} {namespace}/{name}"
            )
        except NotFoundError:
            return None
        except ClusterError as err:
            raise self._fatal(err) from None
        return obj if isinstance(obj, dict) else None
