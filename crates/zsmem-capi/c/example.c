/* A walk through the zsmem C API: a pool of objects named by handles, then
 * a zram-like page store, then a region (memory used through plain
 * pointers, its cold parts compressed). Every call's result is checked; an
 * error prints the library's message. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zsmem.h"

/* Print the failing call and the library's detailed message, then exit. */
static void die(const char *what, long long rc) {
    fprintf(stderr, "%s: %s (%s)\n", what, zsmem_strerror((int)rc), zsmem_last_error_message());
    exit(1);
}

#define TRY(call)                          \
    do {                                   \
        long long rc_ = (call);            \
        if (rc_ < 0) die(#call, rc_);      \
    } while (0)

int main(void) {
    printf("zsmem %s (header %d.%d.%d)\n", zsmem_version(), ZSMEM_VERSION_MAJOR,
           ZSMEM_VERSION_MINOR, ZSMEM_VERSION_PATCH);

    /* A pool: defaults first, then the fields we care about. */
    zsmem_pool_config cfg;
    TRY(zsmem_pool_config_default(&cfg));
    cfg.memory_limit = 64u << 20; /* 64 MiB of zspages at most */
    zsmem_pool *pool;
    TRY(zsmem_pool_new(&cfg, &pool));

    /* What an object of 300 bytes occupies, and the largest the pool takes. */
    int64_t placed = zsmem_pool_placed_size(pool, 300);
    TRY(placed);
    int64_t largest = zsmem_pool_max_object_size(pool);
    TRY(largest);
    printf("300 bytes take %" PRId64 " in the pool; objects up to %" PRId64 " bytes\n", placed,
           largest);

    /* Store an object (alloc + write), or allocate and write in parts. */
    const char msg[] = "a compressed page would go here";
    uint64_t h, h2;
    TRY(zsmem_pool_store(pool, msg, sizeof msg, &h));
    TRY(zsmem_pool_alloc(pool, 300, &h2));
    char part[300];
    memset(part, 'z', sizeof part);
    TRY(zsmem_pool_write(pool, h2, part, sizeof part));
    TRY(zsmem_pool_write_at(pool, h2, 0, "head", 4));

    /* Read it back. A buffer too small is -ENOBUFS and says what is needed. */
    char small[8];
    size_t needed = 0;
    int rc = zsmem_pool_read(pool, h, small, sizeof small, &needed);
    printf("read into 8 bytes: %s; needs %zu\n", zsmem_strerror(rc), needed);
    char *buf = malloc(needed);
    int len = zsmem_pool_read(pool, h, buf, needed, NULL);
    if (len < 0) die("zsmem_pool_read", len);
    printf("object %#" PRIx64 ": %d bytes: \"%s\"\n", h, len, buf);
    free(buf);
    printf("object %#" PRIx64 ": %d bytes\n", h2, zsmem_pool_object_len(pool, h2));

    /* Free; the handle is dead at once. */
    TRY(zsmem_pool_free(pool, h));
    rc = zsmem_pool_free(pool, h);
    printf("double free: %d (%s)\n  %s\n", rc, zsmem_strerror(rc), zsmem_last_error_message());

    /* Statistics, compaction. */
    zsmem_pool_stats st;
    TRY(zsmem_pool_get_stats(pool, &st, sizeof st));
    printf("pool: %" PRIu64 " objects, %" PRIu64 " bytes stored in %" PRIu64
           " pages, %" PRIu64 " bytes of metadata\n",
           st.objects, st.bytes_stored, st.pages_held, st.metadata_bytes);
    int classes = zsmem_pool_class_stats(pool, NULL, 0);
    TRY(classes);
    printf("pool: %d physical size classes\n", classes);
    int64_t freed = zsmem_pool_compact(pool);
    TRY(freed);
    printf("compaction freed %" PRId64 " pages\n", freed);
    TRY(zsmem_pool_free(pool, h2));
    TRY(zsmem_pool_trim(pool));
    zsmem_pool_destroy(pool);

    /* A page store: 1024 slots of 4 KiB pages, zstd level 3. */
    zsmem_store_config scfg;
    TRY(zsmem_store_config_default(&scfg));
    scfg.slots = 1024;
    scfg.codec = ZSMEM_CODEC_ZSTD;
    scfg.zstd_level = 3;
    TRY(zsmem_pool_config_default(&cfg));
    zsmem_store *store;
    TRY(zsmem_store_new(&scfg, &cfg, &store));

    static unsigned char page[4096], out[4096];
    for (size_t i = 0; i < sizeof page; i++) page[i] = "static int x;\n"[i % 14];
    for (size_t slot = 0; slot < 100; slot++) TRY(zsmem_store_write(store, slot, page, sizeof page));
    memset(page, 0, sizeof page);
    TRY(zsmem_store_write(store, 100, page, sizeof page)); /* same-filled: no object */
    TRY(zsmem_store_read(store, 7, out, sizeof out));
    printf("slot 7 starts with \"%.13s\"\n", (const char *)out);
    rc = zsmem_store_write(store, 5000, page, sizeof page);
    printf("slot 5000: %s\n", zsmem_strerror(rc));

    zsmem_mm_stat mm;
    TRY(zsmem_store_mm_stat(store, &mm));
    printf("mm_stat: %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
           " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
           mm.orig_data_size, mm.compr_data_size, mm.mem_used_total, mm.mem_limit,
           mm.mem_used_max, mm.same_pages, mm.pages_compacted, mm.huge_pages,
           mm.huge_pages_since);
    TRY(zsmem_store_discard(store, 0, 50));
    TRY(zsmem_store_compact(store));
    TRY(zsmem_store_mm_stat(store, &mm));
    printf("after discarding 50 slots: orig %" PRIu64 " bytes, pool %" PRIu64 " bytes\n",
           mm.orig_data_size, mm.mem_used_total);
    /* Everything held for the data (what zsmem compare calls all-in); the
       freed pages still waiting to go back to the OS go now. */
    zsmem_store_memory m;
    TRY(zsmem_store_trim(store));
    TRY(zsmem_store_get_memory(store, &m, sizeof m));
    printf("all in: %" PRIu64 " bytes (pool %" PRIu64 ", cached %" PRIu64 ", metadata %" PRIu64
           ") for %" PRIu64 " compressed\n",
           m.all_in_bytes, m.pool_bytes, m.cached_bytes, m.metadata_bytes, m.compr_data_size);
    zsmem_store_destroy(store);

    /* A region: 8 MiB used through a plain pointer, at most 2 MiB of it
       resident; the rest is compressed and comes back on first touch,
       served by the faulting thread itself (ZSMEM_FAULTS_SIGNAL, the
       default). Linux, user-mode userfaultfd: no root, no sysctl. */
    zsmem_region_config rcfg;
    TRY(zsmem_region_config_default(&rcfg));
    rcfg.bytes = 8u << 20;
    rcfg.budget = 2u << 20;
    zsmem_region *region;
    rc = zsmem_region_new(&rcfg, &region);
    if (rc < 0) {
        /* Under valgrind (which does not know userfaultfd), or a kernel
           that refuses it: the message says why. */
        printf("region skipped: %s\n", zsmem_last_error_message());
        return 0;
    }
    uint64_t *w;
    size_t bytes;
    TRY(zsmem_region_ptr(region, (void **)&w, &bytes));
    for (size_t i = 0; i < bytes / 8; i++) w[i] = i / 64; /* compressible runs */
    size_t wrong = 0;
    for (size_t i = 0; i < bytes / 8; i++) wrong += w[i] != i / 64;
    zsmem_region_stats rs;
    TRY(zsmem_region_get_stats(region, &rs, sizeof rs));
    printf("region: %zu bytes, %" PRIu64 " resident, %" PRIu64 " units compressed in %" PRIu64
           " bytes, %" PRIu64 " faults (service p50 %" PRIu64 " ns), %zu words wrong\n",
           bytes, rs.resident_bytes, rs.compressed_units, rs.stored_bytes, rs.faults,
           rs.fault_p50_ns, wrong);
    /* Push the cold part out now (here everything: a target of 0 bytes
       resident); the budget stays as it was. */
    int64_t evicted = zsmem_region_reclaim(region, 0);
    TRY(evicted);
    size_t budget = 0;
    TRY(zsmem_region_get_budget(region, &budget));
    printf("region: %" PRId64 " units pushed out; budget %zu bytes\n", evicted, budget);
    zsmem_region_destroy(region);
    return wrong == 0 ? 0 : 1;
}
