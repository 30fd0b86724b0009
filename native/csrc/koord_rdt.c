/* CPUID-based RDT detection, the bulk tasks writer and the resctrl mount (see koord_rdt.h).
 *
 * Leaves (Intel SDM vol. 3B ch. 17.18-19; AMD PQoS spec 56375):
 *   0          vendor, max basic leaf
 *   7/0        EBX[12] PQM (monitoring), EBX[15] PQE (allocation)
 *   0x10/0     EBX[1] L3 CAT, EBX[2] L2 CAT, EBX[3] MBA
 *   0x10/1,2   EAX[4:0] CBM length - 1, ECX[2] CDP, EDX[15:0] highest COS (L3, L2)
 *   0x10/3     EAX[11:0] max MBA throttle - 1, ECX[2] linear, EDX[15:0] highest COS
 *   0xF/0      EDX[1] L3 monitoring
 *   0xF/1      EBX occupancy scale, ECX highest RMID, EDX[0] occupancy, [1] total BW, [2] local BW
 *   0x80000020 AMD L3 bandwidth enforcement: /0 EBX[1]; /1 EAX bandwidth length, EDX highest COS
 */
#define _GNU_SOURCE
#include "koord_rdt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KOORD_HAVE_CPUID 1
#else
#define KOORD_HAVE_CPUID 0
#endif

#if KOORD_HAVE_CPUID
static void leaf(uint32_t l, uint32_t sub, uint32_t r[4])
{
    __cpuid_count(l, sub, r[0], r[1], r[2], r[3]);
}

static void detect_x86(struct koord_rdt_caps *c)
{
    uint32_t r[4];
    c->cpuid_available = 1;
    leaf(0, 0, r);
    c->max_leaf = r[0];
    memcpy(c->vendor, &r[1], 4);
    memcpy(c->vendor + 4, &r[3], 4);
    memcpy(c->vendor + 8, &r[2], 4);
    c->vendor[12] = '\0';
    int amd = strcmp(c->vendor, "AuthenticAMD") == 0 || strcmp(c->vendor, "HygonGenuine") == 0;

    if (c->max_leaf >= 7) {
        leaf(7, 0, r);
        c->rdt_monitoring = (r[1] >> 12) & 1;
        c->rdt_allocation = (r[1] >> 15) & 1;
    }
    if (c->rdt_allocation && c->max_leaf >= 0x10) {
        leaf(0x10, 0, r);
        uint32_t res = r[1];
        if (res & (1u << 1)) {
            leaf(0x10, 1, r);
            c->l3_cat = 1;
            c->l3_cbm_length = (int)(r[0] & 0x1f) + 1;
            c->l3_cdp = (r[2] >> 2) & 1;
            c->l3_num_closids = (int)(r[3] & 0xffff) + 1;
        }
        if (res & (1u << 2)) {
            leaf(0x10, 2, r);
            c->l2_cat = 1;
            c->l2_cbm_length = (int)(r[0] & 0x1f) + 1;
            c->l2_cdp = (r[2] >> 2) & 1;
            c->l2_num_closids = (int)(r[3] & 0xffff) + 1;
        }
        if (!amd && (res & (1u << 3))) {
            leaf(0x10, 3, r);
            c->mba = 1;
            c->mba_max = (int)(r[0] & 0xfff) + 1;
            c->mba_linear = (r[2] >> 2) & 1;
            c->mba_num_closids = (int)(r[3] & 0xffff) + 1;
        }
    }
    if (amd && c->rdt_allocation) {
        leaf(0x80000000, 0, r);
        if (r[0] >= 0x80000020) {
            leaf(0x80000020, 0, r);
            if (r[1] & (1u << 1)) {
                leaf(0x80000020, 1, r);
                c->mba = 1;
                c->mba_max = 1 << (r[0] & 0x1f);
                c->mba_linear = 1;
                c->mba_absolute = 1;
                c->mba_num_closids = (int)(r[3] & 0xffff) + 1;
            }
        }
    }
    if (c->rdt_monitoring && c->max_leaf >= 0xf) {
        leaf(0xf, 0, r);
        if (r[3] & (1u << 1)) {
            leaf(0xf, 1, r);
            c->occupancy_scale = r[1];
            c->max_rmid = r[2];
            c->cmt = r[3] & 1;
            c->mbm_total = (r[3] >> 1) & 1;
            c->mbm_local = (r[3] >> 2) & 1;
        }
    }
}
#endif

int koord_rdt_detect(struct koord_rdt_caps *out)
{
    memset(out, 0, sizeof(*out));
#if KOORD_HAVE_CPUID
    detect_x86(out);
#else
    strcpy(out->vendor, "unknown");
#endif
    return 0;
}

int koord_write_tasks(const char *path, const int64_t *ids, size_t n, int *errs)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[32];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(buf, sizeof(buf), "%lld\n", (long long)ids[i]);
        ssize_t w;
        do {
            w = write(fd, buf, (size_t)len);
        } while (w < 0 && errno == EINTR);
        /* The kernel takes or refuses the whole id in one call; a short write of a tiny buffer never
         * happens on these files, and on a regular file it would mean the disk is full. */
        if (w < 0)
            errs[i] = errno;
        else if (w != len)
            errs[i] = EIO;
        else
            errs[i] = 0;
    }
    if (close(fd) < 0)
        return -errno;
    return 0;
}

int koord_mount_resctrl(const char *target)
{
    if (mount("resctrl", target, "resctrl", MS_RELATIME, NULL) < 0)
        return errno;
    return 0;
}
