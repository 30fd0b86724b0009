/* koord-native: the few things the koordlet needs from C for resctrl (see README.md). */
#ifndef KOORD_RDT_H
#define KOORD_RDT_H

#include <stddef.h>
#include <stdint.h>

struct koord_rdt_caps {
    int cpuid_available;       /* 0 on a CPU (or build) without the CPUID instruction */
    char vendor[13];           /* "GenuineIntel", "AuthenticAMD", ... NUL-terminated */
    uint32_t max_leaf;         /* highest basic CPUID leaf */
    int rdt_monitoring;        /* CPUID.(7,0):EBX[12] (Intel PQM / AMD PQM) */
    int rdt_allocation;        /* CPUID.(7,0):EBX[15] (Intel PQE / AMD PQE) */
    int l3_cat;                /* L3 cache allocation */
    int l3_cbm_length;         /* bits of an L3 capacity bitmask */
    int l3_num_closids;        /* highest L3 COS + 1 */
    int l3_cdp;                /* code/data prioritization */
    int l2_cat;
    int l2_cbm_length;
    int l2_num_closids;
    int l2_cdp;
    int mba;                   /* memory bandwidth allocation (Intel MBA, AMD L3 MBE) */
    int mba_max;               /* Intel: max throttle value; AMD: largest bandwidth value (2^len) */
    int mba_linear;            /* Intel: delay values are linear; AMD: always 1 (absolute units) */
    int mba_absolute;          /* 1 when values are bandwidth units (AMD), 0 for percentages (Intel) */
    int mba_num_closids;
    int cmt;                   /* L3 occupancy monitoring */
    int mbm_total;
    int mbm_local;
    uint32_t max_rmid;         /* highest L3 RMID */
    uint32_t occupancy_scale;  /* bytes per occupancy unit */
};

/* Fill *out from CPUID. Returns 0 (there is nothing that can fail beyond the instruction's absence). */
int koord_rdt_detect(struct koord_rdt_caps *out);

/* Write each id of ids[0..n) to path with its own write(2), in order, the way resctrl and cgroup v1 tasks
 * files take them. errs[i] gets 0 or the errno of id i (ESRCH: the thread is gone). Returns 0 when the
 * file could be opened (even if some ids failed), else -errno and errs is untouched. */
int koord_write_tasks(const char *path, const int64_t *ids, size_t n, int *errs);

/* mount -t resctrl resctrl <target> (MS_RELATIME). Returns 0 or errno. */
int koord_mount_resctrl(const char *target);

#endif
