"""cffi API-mode (out-of-line) build of ``koord_native._rdt``, run by setuptools' ``cffi_modules``.

It compiles ``csrc/koord_rdt.c`` with the machine's C compiler. Without one, building stops here with a
message that says what to install; nothing else of koord needs this package (the Resctrl strategy reports
itself unsupported when ``koord_native`` cannot be imported).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"

NO_COMPILER = """
koord-native needs a C compiler to build its cffi extension, and none was found ({cc!r}).
Install one (Debian/Ubuntu: apt-get install gcc python3-dev; Fedora: dnf install gcc python3-devel)
or point CC at it, then install koord-native again. The rest of koord works without it: the Resctrl
QoS strategy then reports itself unsupported on this node.
""".strip()


def _check_compiler() -> None:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    program = shlex.split(cc)[0] if cc.strip() else "cc"
    if shutil.which(program) is None:
        raise SystemExit(NO_COMPILER.format(cc=cc))


_check_compiler()

ffibuilder = FFI()
ffibuilder.cdef(
    """
    struct koord_rdt_caps {
        int cpuid_available;
        char vendor[13];
        uint32_t max_leaf;
        int rdt_monitoring;
        int rdt_allocation;
        int l3_cat;
        int l3_cbm_length;
        int l3_num_closids;
        int l3_cdp;
        int l2_cat;
        int l2_cbm_length;
        int l2_num_closids;
        int l2_cdp;
        int mba;
        int mba_max;
        int mba_linear;
        int mba_absolute;
        int mba_num_closids;
        int cmt;
        int mbm_total;
        int mbm_local;
        uint32_t max_rmid;
        uint32_t occupancy_scale;
    };
    int koord_rdt_detect(struct koord_rdt_caps *out);
    int koord_write_tasks(const char *path, const int64_t *ids, size_t n, int *errs);
    int koord_mount_resctrl(const char *target);
    """
)
ffibuilder.set_source(
    "koord_native._rdt",
    '#include "koord_rdt.h"',
    sources=[str((CSRC / "koord_rdt.c").relative_to(HERE))],
    include_dirs=[str(CSRC.relative_to(HERE))],
    extra_compile_args=["-O2", "-Wall", "-std=c11"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
