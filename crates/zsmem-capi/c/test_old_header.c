/* A program built against an earlier zsmem.h, run against today's library.
 *
 * run-tests.sh builds this file once per header kept in old-headers/ (see
 * old-headers/README.md) and runs each build against today's libzsmem.so:
 * the configuration structs it sees are that header's, smaller than
 * today's. Their init functions must fill exactly the caller's bytes (the
 * fields of that version, with today's defaults) and nothing past them,
 * and the pool and store made from them must work and honour those
 * fields.
 *
 * Only what the first header declared is used, so that every header
 * compiles it, except for regions, checked only against the headers that
 * declare them (those defining zsmem_region_config_default). Prints one line per check that fails and exits 0 only if
 * none did. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zsmem.h"

static int failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#define CHECK_RC(expr, want)                                                              \
    do {                                                                                  \
        long long rc_ = (long long)(expr);                                                \
        long long want_ = (long long)(want);                                              \
        if (rc_ != want_) {                                                               \
            fprintf(stderr, "  %s:%d: %s returned %lld (%s), want %lld\n  last error: %s\n", \
                    __FILE__, __LINE__, #expr, rc_, zsmem_strerror((int)rc_), want_,      \
                    zsmem_last_error_message());                                          \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* Bytes after the caller's struct that the library must not touch: the
   struct as an older program has it, followed by whatever the program
   keeps next to it. */
#define GUARD 64
#define GUARD_BYTE 0xA5

struct pool_config_in_place {
    zsmem_pool_config cfg;
    unsigned char after[GUARD];
};

struct store_config_in_place {
    zsmem_store_config cfg;
    unsigned char after[GUARD];
};

static int untouched(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != GUARD_BYTE) return 0;
    }
    return 1;
}

int main(void) {
    printf("header of %zu-byte zsmem_pool_config, %zu-byte zsmem_store_config; library %s\n",
           sizeof(zsmem_pool_config), sizeof(zsmem_store_config), zsmem_version());
    fflush(stdout); /* before any failure on stderr */

    /* The _default macros as the program calls them: they pass its sizeof. */
    struct pool_config_in_place p;
    memset(&p, GUARD_BYTE, sizeof p);
    CHECK_RC(zsmem_pool_config_default(&p.cfg), 0);
    CHECK(p.cfg.size == sizeof p.cfg);
    CHECK(p.cfg.page_size == 4096 && p.cfg.class_delta == 16 && p.cfg.memory_limit == 0);
    CHECK(p.cfg.compaction == ZSMEM_COMPACTION_AUTO && p.cfg.compaction_max_moves >= 1);
    CHECK(untouched(p.after, sizeof p.after));

    struct store_config_in_place s;
    memset(&s, GUARD_BYTE, sizeof s);
    CHECK_RC(zsmem_store_config_default(&s.cfg), 0);
    CHECK(s.cfg.size == sizeof s.cfg);
    CHECK(s.cfg.slots == 262144 && s.cfg.codec == ZSMEM_CODEC_LZ4 && s.cfg.zstd_level == 3);
    CHECK(untouched(s.after, sizeof s.after));

    /* Exactly the struct's bytes on the heap too (valgrind, when run under
       it, reports a write past them). */
    zsmem_pool_config *heap = malloc(sizeof *heap);
    CHECK(heap != NULL);
    if (heap != NULL) {
        CHECK_RC(zsmem_pool_config_default(heap), 0);
        CHECK(heap->size == sizeof *heap);
        free(heap);
    }

    /* A pool from the old struct: a field the program set is honoured. */
    p.cfg.page_size = 8192;
    zsmem_pool *pool = NULL;
    CHECK_RC(zsmem_pool_new(&p.cfg, &pool), 0);
    if (pool != NULL) {
        char data[3000];
        for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7);
        uint64_t h = 0;
        CHECK_RC(zsmem_pool_store(pool, data, sizeof data, &h), 0);
        char back[sizeof data];
        CHECK_RC(zsmem_pool_read(pool, h, back, sizeof back, NULL), (int)sizeof data);
        CHECK(memcmp(back, data, sizeof data) == 0);
        /* The header's stats struct, shorter than today's: its fields
           filled, nothing past them. */
        struct {
            zsmem_pool_stats st;
            unsigned char after[GUARD];
        } ps;
        memset(&ps, GUARD_BYTE, sizeof ps);
        CHECK_RC(zsmem_pool_get_stats(pool, &ps.st, sizeof ps.st), 0);
        CHECK(ps.st.page_size == 8192 && ps.st.objects == 1 && ps.st.bytes_stored == sizeof data);
        CHECK(untouched(ps.after, sizeof ps.after));
        CHECK_RC(zsmem_pool_free(pool, h), 0);
        CHECK_RC(zsmem_pool_check_invariants(pool), 0);
        zsmem_pool_destroy(pool);
    }

    /* A store from the old structs. */
    p.cfg.page_size = 4096;
    s.cfg.slots = 16;
    zsmem_store *store = NULL;
    CHECK_RC(zsmem_store_new(&s.cfg, &p.cfg, &store), 0);
    if (store != NULL) {
        unsigned char page[4096], out[4096];
        for (size_t i = 0; i < sizeof page; i++) page[i] = (unsigned char)(i % 251);
        CHECK_RC(zsmem_store_write(store, 15, page, sizeof page), 0);
        CHECK_RC(zsmem_store_read(store, 15, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
        CHECK_RC(zsmem_store_write(store, 16, page, sizeof page), -ERANGE);
        zsmem_mm_stat mm;
        CHECK_RC(zsmem_store_mm_stat(store, &mm), 0);
        CHECK(mm.orig_data_size == 4096);
        zsmem_store_destroy(store);
    }

#ifdef zsmem_region_config_default
    /* A region config of the old size: its prefix of today's defaults,
       nothing past it, and a region made from it. */
    struct {
        zsmem_region_config cfg;
        unsigned char after[GUARD];
    } r;
    memset(&r, GUARD_BYTE, sizeof r);
    CHECK_RC(zsmem_region_config_default(&r.cfg), 0);
    CHECK(r.cfg.size == sizeof r.cfg);
    CHECK(r.cfg.unit == 4096 && r.cfg.codec == ZSMEM_CODEC_LZ4);
    CHECK(untouched(r.after, sizeof r.after));
    r.cfg.bytes = 1 << 20;
    r.cfg.budget = 256 << 10;
    zsmem_region *region = NULL;
    int rc = zsmem_region_new(&r.cfg, &region);
    if (rc == 0) {
        unsigned char *mem = NULL;
        size_t len = 0;
        CHECK_RC(zsmem_region_ptr(region, (void **)&mem, &len), 0);
        for (size_t i = 0; i < len; i++) mem[i] = (unsigned char)(i / 4096);
        int same = 1;
        for (size_t i = 0; i < len; i++) same &= mem[i] == (unsigned char)(i / 4096);
        CHECK(same);
        struct {
            zsmem_region_stats st;
            unsigned char after[GUARD];
        } rs;
        memset(&rs, GUARD_BYTE, sizeof rs);
        CHECK_RC(zsmem_region_get_stats(region, &rs.st, sizeof rs.st), 0);
        CHECK(rs.st.bytes == 1 << 20 && rs.st.unit == 4096);
        CHECK(untouched(rs.after, sizeof rs.after));
        zsmem_region_destroy(region);
    } else {
        printf("region skipped: %s\n", zsmem_last_error_message());
    }
#endif

    if (failures != 0) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
