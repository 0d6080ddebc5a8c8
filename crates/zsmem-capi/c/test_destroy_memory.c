/* Memory back after destroy (issue 31): a process that makes a page store,
 * fills it and destroys it keeps little more anonymous memory than before.
 *
 * Before the fix a 64K-slot store left about 1.4 MiB (log placement) or
 * 2.3 MiB (size classes) of freed heap in glibc's malloc, and now and then
 * its whole 22 MB pool for 100 ms when zsmem's returner thread held the
 * pool's pages at the moment of the destroy. Now the destroy discards the
 * pages itself and gives the heap back: about 0.2 MiB stays (log) and
 * 0.6-0.8 MiB (classes), malloc's own caches and zsmem's thread.
 *
 * Prints the growth after each of a few cycles of each placement and fails
 * if any is 1 MiB (log) or 1.5 MiB (classes) or more. Run natively only:
 * valgrind's malloc has no malloc_trim. Also a probe: `test_destroy_memory
 * SLOTS CYCLES` prints the figures for other sizes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zsmem.h"

/* The process's anonymous memory, kB (smaps_rollup's Anonymous). */
static long anon_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Anonymous: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* Make, fill with text-like pages and destroy a store of `slots` slots. */
static int cycle(uint32_t placement, size_t slots) {
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    cfg.placement = placement;
    scfg.slots = slots;
    int rc = zsmem_store_new(&scfg, &cfg, &store);
    if (rc) {
        fprintf(stderr, "zsmem_store_new: %s\n", zsmem_last_error_message());
        return rc;
    }
    static unsigned char page[4096];
    for (size_t i = 0; i < slots; i++) {
        for (size_t j = 0; j < sizeof page; j++)
            page[j] = (unsigned char)('A' + ((i * 31 + j / 7 * (i % 13)) & 0x3f));
        rc = zsmem_store_write(store, i, page, sizeof page);
        if (rc) {
            fprintf(stderr, "zsmem_store_write: %s\n", zsmem_last_error_message());
            break;
        }
    }
    zsmem_store_destroy(store);
    return rc;
}

int main(int argc, char **argv) {
    size_t slots = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
    int cycles = argc > 2 ? atoi(argv[2]) : 3;
    if (anon_kb() < 0) {
        printf("skipping: no /proc/self/smaps_rollup\n");
        return 0;
    }
    struct {
        const char *name;
        uint32_t placement;
        long limit_kb;
    } kinds[] = {
        {"log placement", ZSMEM_PLACEMENT_LOG, 1024},
        {"size classes", ZSMEM_PLACEMENT_CLASSES, 1536},
    };
    int failed = 0;
    long base = anon_kb();
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int c = 0; c < cycles; c++) {
            if (cycle(kinds[k].placement, slots)) return 1;
            long grown = anon_kb() - base;
            int ok = grown < kinds[k].limit_kb;
            printf("%s, %zu slots, cycle %d: %ld kB more than before the first store%s\n",
                   kinds[k].name, slots, c + 1, grown, ok ? "" : " (too much)");
            failed |= !ok;
        }
    }
    return failed;
}
