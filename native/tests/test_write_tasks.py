"""The bulk tasks writer against files that refuse ids: a regular file under a size limit (EFBIG past it)
and a real cgroup v1 ``tasks`` file (ESRCH for a thread that is gone), in a sub-hierarchy made and removed
here."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

koord_native = pytest.importorskip("koord_native")


def test_one_write_per_id_in_order(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.write_text("7\n")
    result = koord_native.write_tasks(tasks, [3, 1, 2])
    assert result.errnos == (0, 0, 0)
    assert result.written == (3, 1, 2) and result.ok
    assert tasks.read_text() == "7\n3\n1\n2\n"  # appended, never truncated


def test_no_ids_writes_nothing(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.write_text("")
    result = koord_native.write_tasks(tasks, [])
    assert result.ids == () and result.errnos == () and result.ok
    assert tasks.read_text() == ""


def test_missing_file_is_an_oserror_not_a_creation(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        koord_native.write_tasks(tmp_path / "BE" / "tasks", [1])
    with pytest.raises(FileNotFoundError):
        koord_native.write_tasks(tmp_path / "tasks", [1])
    assert not (tmp_path / "tasks").exists()
    with pytest.raises(IsADirectoryError):
        koord_native.write_tasks(tmp_path, [1])


def test_out_of_range_id_is_refused_before_any_write(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.write_text("")
    with pytest.raises(ValueError, match="64 bits"):
        koord_native.write_tasks(tasks, [1, 2**64])
    assert tasks.read_text() == ""


_SIZE_LIMITED = """
import json, resource, signal, sys
import koord_native
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
r = koord_native.write_tasks(sys.argv[1], [int(a) for a in sys.argv[3:]])
print(json.dumps({"errnos": r.errnos, "failed": r.failed, "ok": r.ok}))
"""


def test_a_file_that_refuses_some_ids_reports_each(tmp_path: Path) -> None:
    """A file that takes 10 bytes and refuses the rest (RLIMIT_FSIZE -> EFBIG): the writer keeps going
    after a refusal and says which ids failed with what."""
    tasks = tmp_path / "tasks"
    tasks.write_text("")
    ids = ["11", "12", "13", "14", "15"]  # 3 bytes each: 3 fit in 10 bytes... the 4th would cross
    proc = subprocess.run(
        [sys.executable, "-c", _SIZE_LIMITED, str(tasks), "10", *ids],
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(proc.stdout)
    # a write crossing the limit is cut to what fits (a short write, EIO here); the ones after get EFBIG
    assert out["errnos"][:3] == [0, 0, 0]
    assert out["errnos"][3] in (errno.EIO, errno.EFBIG)
    assert out["errnos"][4] == errno.EFBIG
    assert not out["ok"]
    assert tasks.read_text().startswith("11\n12\n13\n")


def test_vanished_and_failed_are_told_apart() -> None:
    r = koord_native.TaskWriteResult("x/tasks", (1, 2, 3), (0, errno.ESRCH, errno.EINVAL))
    assert r.written == (1,) and r.vanished == (2,) and r.failed == {3: errno.EINVAL}
    assert not r.ok
    assert "1 written" in r.describe() and "1 vanished" in r.describe() and "EINVAL" in r.describe()
    assert koord_native.TaskWriteResult("t", (5, 6), (errno.ESRCH, 0)).ok


# --- a real cgroup v1 hierarchy ----------------------------------------------------------------------------

_CPU_V1 = Path("/sys/fs/cgroup/cpu")


def _v1_cpu_writable() -> bool:
    return os.geteuid() == 0 and (_CPU_V1 / "tasks").is_file() and os.access(_CPU_V1, os.W_OK)


@pytest.fixture
def v1_group() -> Iterator[Path]:
    if not _v1_cpu_writable():
        pytest.skip("needs root and a writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu")
    group = _CPU_V1 / f"koord-native-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        yield group
    finally:
        # a cgroup is removable once empty; the test's processes are gone by now, retry briefly anyway
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
        assert not group.exists(), f"could not remove {group}"


_THREADED = """
import threading, time, sys
evs = [threading.Event() for _ in range(3)]
ts = [threading.Thread(target=e.wait, daemon=True) for e in evs]
for t in ts: t.start()
print("ready", flush=True)
sys.stdin.read()
"""


def _reaped_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.cgroup
def test_real_cgroup_tasks_file(v1_group: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _THREADED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        assert len(tids) == 4
        gone = _reaped_pid()
        ids = [tids[0], gone, *tids[1:]]
        result = koord_native.write_tasks(v1_group / "tasks", ids)
        assert result.vanished == (gone,)
        assert sorted(result.written) == tids
        assert result.ok
        inside = {int(x) for x in (v1_group / "tasks").read_text().split()}
        assert inside == set(tids)
        # the kernel refuses a negative id too, reported for that id
        negative = koord_native.write_tasks(v1_group / "tasks", [-5])
        assert negative.errnos[0] != 0 and not negative.written
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    assert (v1_group / "tasks").read_text().strip() == ""
