"""A fake resctrl filesystem that answers writes the way the kernel does (``fs/resctrl``, ``arch/x86``).

Reads need no help: every file is a plain file under the tree, in the kernel's format (``info/L3/cbm_mask``,
``num_closids``, ``info/MB``, ``schemata`` with masks zero-padded to the mask width, ``tasks``, ``mon_data``).
Writes are where a plain file would lie: it takes anything. So the operations that change resctrl go
through this object, which a strategy under test is given in place of the host's::

    tree = FakeHostTree(tmp_path).with_resctrl(cbm_mask="7ff", cache_ids=(0, 1))
    tree.add_threads(pod.containers["main"], [101, 102])
    kernel = tree.resctrl            # mount / make_group / remove_group / write_schemata / write_tasks
    kernel.write_schemata(tree.paths.resctrl_file("BE", "schemata"), "L3:0=f0f\\n")   # OSError(EINVAL)

What it refuses, with the kernel's errno and its ``info/last_cmd_status`` line:

* a schemata write without a trailing newline, a line without ``:``, an unknown resource, a domain that
  is missing ``=``, non-numeric or unknown, an L3 mask that is empty, not contiguous or wider than
  ``cbm_mask``, an MB value outside ``[min_bandwidth, max]`` (Intel percentages are rounded up to the
  bandwidth granularity) -- all ``EINVAL``, and nothing of the write is applied;
* a task id of a thread that does not exist (``ESRCH``), a negative or non-integer id (``EINVAL``);
* a group beyond ``num_closids`` (``ENOSPC``), a group that exists (``EEXIST``), a nested control group.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FakeCacheAllocation", "FakeMBA", "FakeRdtCapabilities", "FakeResctrl", "resctrl_node_slo"]

AMD_VENDOR_ID = "AuthenticAMD"
_AMD_MB_MAX = 2048


@dataclass(frozen=True, slots=True)
class FakeCacheAllocation:
    cbm_length: int
    num_closids: int
    cdp: bool = False


@dataclass(frozen=True, slots=True)
class FakeMBA:
    max_value: int
    linear: bool
    absolute: bool
    num_closids: int


@dataclass(frozen=True, slots=True)
class FakeRdtCapabilities:
    """What CPUID would answer on the fake host (the shape of ``koord_native.RdtCapabilities``)."""

    cpuid_available: bool
    vendor: str
    l3_cat: FakeCacheAllocation | None
    mba: FakeMBA | None

    @property
    def supports_resctrl(self) -> bool:
        return self.l3_cat is not None and self.mba is not None


class FakeResctrl:
    """The kernel side of a fake resctrl mount at ``root``; ``live_threads`` are the ids that exist."""

    def __init__(
        self,
        root: Path,
        *,
        vendor: str,
        cbm_mask: str,
        cache_ids: Sequence[int],
        mb: bool,
        num_closids: int,
        live_threads: set[int],
        mounted: bool = True,
        mountable: bool = True,
    ) -> None:
        self.root = root
        self.vendor = vendor
        self.cbm_mask = cbm_mask
        self.cbm = int(cbm_mask, 16)
        self.width = len(cbm_mask)
        self.cache_ids = tuple(sorted(cache_ids))
        self.mb = mb
        self.num_closids = num_closids
        self.live_threads = live_threads
        self.mountable = mountable
        self.mounts = 0
        """How many times ``mount`` was called (a test can check that a mounted tree is left alone)."""
        self.writes: list[tuple[str, str]] = []
        """Every accepted schemata write (path, text), in order."""
        self.amd = vendor == AMD_VENDOR_ID
        self.mb_max = _AMD_MB_MAX if self.amd else 100
        self.mb_min = 0 if self.amd else 10
        self.mb_gran = 1 if self.amd else 10
        if mounted:
            self._populate()

    # --- what CPUID would say ------------------------------------------------------------------------
    def capabilities(self) -> FakeRdtCapabilities:
        return FakeRdtCapabilities(
            cpuid_available=True,
            vendor=self.vendor,
            l3_cat=FakeCacheAllocation(self.cbm.bit_length(), self.num_closids),
            mba=FakeMBA(self.mb_max, True, self.amd, self.num_closids) if self.mb else None,
        )

    # --- mount and groups ----------------------------------------------------------------------------
    def mount(self, target: Path) -> None:
        """``mount -t resctrl``: EBUSY when mounted, ENODEV on a host whose kernel cannot."""
        if Path(target) != self.root:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(target))
        if not self.mountable:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV), str(target))
        if (self.root / "info").is_dir():
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(target))
        self.mounts += 1
        self._populate()

    def _populate(self) -> None:
        info = self.root / "info"
        files = {
            info / "last_cmd_status": "ok",
            info / "L3" / "cbm_mask": self.cbm_mask,
            info / "L3" / "min_cbm_bits": "1",
            info / "L3" / "num_closids": str(self.num_closids),
            info / "L3" / "shareable_bits": "0",
            info / "L3_MON" / "mon_features": "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes",
            info / "L3_MON" / "num_rmids": str(self.num_closids * 8),
        }
        if self.mb:
            files.update(
                {
                    info / "MB" / "bandwidth_gran": str(self.mb_gran),
                    info / "MB" / "delay_linear": "1",
                    info / "MB" / "min_bandwidth": str(self.mb_min),
                    info / "MB" / "num_closids": str(self.num_closids),
                }
            )
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")
        self._init_group(self.root)
        (self.root / "tasks").write_text("".join(f"{t}\n" for t in sorted(self.live_threads)))

    def _init_group(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        l3 = {i: self.cbm for i in self.cache_ids}
        mb = {i: self.mb_max for i in self.cache_ids} if self.mb else {}
        self._store_schemata(d / "schemata", l3, mb)
        (d / "tasks").write_text("")
        (d / "cpus_list").write_text("\n")
        for i in self.cache_ids:
            mon = d / "mon_data" / f"mon_L3_{i:02d}"
            mon.mkdir(parents=True, exist_ok=True)
            for name in ("llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"):
                (mon / name).write_text("0\n")

    def groups(self) -> list[str]:
        return sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and p.name not in ("info", "mon_data", "mon_groups")
        )

    def make_group(self, path: Path) -> None:
        """``mkdir``: only directly under the root; one CLOSID per group, the root holds one."""
        path = Path(path)
        if path.parent != self.root:
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), str(path))
        if path.exists():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        if len(self.groups()) + 1 >= self.num_closids:
            self._status("out of CLOSIDs")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        self._init_group(path)
        self._status("ok")

    def remove_group(self, path: Path) -> None:
        """``rmdir``: the group's tasks go back to the root group."""
        path = Path(path)
        if path.parent != self.root or not path.is_dir():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        moved = _read_ids(path / "tasks")
        shutil.rmtree(path)
        if moved:
            root_tasks = self.root / "tasks"
            ids = _read_ids(root_tasks) | moved
            root_tasks.write_text("".join(f"{t}\n" for t in sorted(ids)))

    # --- schemata ------------------------------------------------------------------------------------
    def write_schemata(self, path: Path, text: str) -> None:
        """One ``write(2)`` of ``text``: every line is checked first, then all of them are applied."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        current = self._parse_stored(path)
        if not text.endswith("\n"):
            self._refuse(path, "Missing newline at end of schemata")
        staged = {k: dict(v) for k, v in current.items()}
        for line in text.split("\n"):
            if not line.strip():
                continue
            name, sep, rest = line.partition(":")
            name = name.strip()
            if not sep:
                self._refuse(path, f"Missing ':' in line {line!r}")
            if not rest.strip():
                self._refuse(path, f"Missing '{name}' value")
            if name not in staged:
                self._refuse(path, f"Unknown or unsupported resource name '{name}'")
            for dom in rest.split(";"):
                dom = dom.strip()
                if not dom:
                    continue
                ident, eq, value = dom.partition("=")
                if not eq or not ident.strip().isdigit():
                    self._refuse(path, "Missing '=' or non-numeric domain")
                cache_id = int(ident)
                if cache_id not in self.cache_ids:
                    self._refuse(path, f"Unknown domain {cache_id}")
                staged[name][cache_id] = (
                    self._parse_mask(path, value) if name == "L3" else self._parse_bw(path, value)
                )
        self._store_schemata(path, staged["L3"], staged.get("MB", {}))
        self.writes.append((str(path), text))
        self._status("ok")

    def _parse_mask(self, path: Path, value: str) -> int:
        try:
            mask = int(value.strip(), 16)
        except ValueError:
            self._refuse(path, f"Non-hex character in the mask {value}")
        if mask == 0 or mask & ~self.cbm:
            self._refuse(path, f"Mask out of range 0x{mask:x}")
        low = mask & -mask
        if (mask + low) & mask:
            self._refuse(path, f"The mask 0x{mask:x} has non-consecutive 1-bits")
        return mask

    def _parse_bw(self, path: Path, value: str) -> int:
        try:
            bw = int(value.strip(), 10)
        except ValueError:
            self._refuse(path, f"Non-decimal digit in MB value {value}")
        if bw < self.mb_min or bw > self.mb_max:
            self._refuse(path, f"MB value {bw} out of range [{self.mb_min},{self.mb_max}]")
        return -(-bw // self.mb_gran) * self.mb_gran

    def _refuse(self, path: Path, message: str) -> None:
        self._status(message)
        raise OSError(errno.EINVAL, f"{os.strerror(errno.EINVAL)}: {message}", str(path))

    def _status(self, message: str) -> None:
        status = self.root / "info" / "last_cmd_status"
        if status.parent.is_dir():
            status.write_text(message + "\n")

    def _parse_stored(self, path: Path) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = {"L3": {}}
        if self.mb:
            out["MB"] = {}
        for line in path.read_text().splitlines():
            name, _, rest = line.strip().partition(":")
            if name not in out:
                continue
            for dom in rest.split(";"):
                ident, _, value = dom.partition("=")
                if ident.strip():
                    out[name][int(ident)] = int(value, 16 if name == "L3" else 10)
        return out

    def _store_schemata(self, path: Path, l3: Mapping[int, int], mb: Mapping[int, int]) -> None:
        lines = ["L3:" + ";".join(f"{i}={l3[i]:0{self.width}x}" for i in sorted(l3))]
        if self.mb:
            lines.append("MB:" + ";".join(f"{i}={mb[i]}" for i in sorted(mb)))
        path.write_text("\n".join(lines) + "\n")

    # --- tasks ---------------------------------------------------------------------------------------
    def write_tasks(self, path: Path, ids: Iterable[int]) -> tuple[int, ...]:
        """One ``write(2)`` per id; each answer is 0 or an errno. A taken id leaves every other group."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        group_files = [self.root / "tasks", *(self.root / g / "tasks" for g in self.groups())]
        members = {f: _read_ids(f) for f in group_files}
        answers = []
        for tid in ids:
            if tid < 0:
                answers.append(errno.EINVAL)
            elif tid not in self.live_threads:
                self._status(f"No task {tid}")
                answers.append(errno.ESRCH)
            else:
                for ids_in in members.values():
                    ids_in.discard(tid)
                members.setdefault(path, set()).add(tid)
                answers.append(0)
        for f, ids_in in members.items():
            f.write_text("".join(f"{t}\n" for t in sorted(ids_in)))
        return tuple(answers)

    def start_threads(self, ids: Iterable[int]) -> None:
        """New threads: alive, and in the root group (where a task whose group nobody set lives)."""
        new = set(ids) - self.live_threads
        self.live_threads |= new
        root_tasks = self.root / "tasks"
        if new and root_tasks.is_file():
            root_tasks.write_text("".join(f"{t}\n" for t in sorted(_read_ids(root_tasks) | new)))

    def exit_threads(self, ids: Iterable[int]) -> None:
        """Threads exit: they leave the resctrl groups (the cgroup files are the host tree's business)."""
        gone = set(ids)
        self.live_threads -= gone
        for f in [self.root / "tasks", *(self.root / g / "tasks" for g in self.groups())]:
            if f.is_file():
                left = _read_ids(f) - gone
                f.write_text("".join(f"{t}\n" for t in sorted(left)))


def _read_ids(path: Path) -> set[int]:
    try:
        return {int(x) for x in path.read_text().split()}
    except FileNotFoundError:
        return set()


def resctrl_node_slo(**classes: Mapping[str, object]) -> dict[str, object]:
    """A NodeSLO spec setting ``resourceQOSStrategy.<class>.resctrlQOS`` per keyword::

    resctrl_node_slo(beClass={"enable": True, "catRangeEndPercent": 30})
    """
    return {"resourceQOSStrategy": {k: {"resctrlQOS": dict(v)} for k, v in classes.items()}}
