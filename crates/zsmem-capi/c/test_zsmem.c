/* Tests of the zsmem C API from C: every function, its success and its
 * error paths (NULL arguments, stale and double-freed handles, other pools'
 * handles, short buffers, the memory limit, slots out of range, bad
 * configurations, forged pool and store pointers), the values the report
 * and size calls give, and threads sharing one pool with every byte
 * checked.
 *
 * Prints one line per test and closes with "N passed, N failed"; exits 0
 * only if every test passed. ZSMEM_TEST_OPS sets the operations per thread
 * of the threaded test (default 20000; run-tests.sh lowers it under
 * valgrind). */
/* mkdtemp and rmdir are POSIX.1-2008; the rest is C11. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zsmem.h"

static int check_failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                          \
        }                                                                              \
    } while (0)

/* `expr` must return `want`; on a mismatch print both and the last error. */
#define CHECK_RC(expr, want)                                                              \
    do {                                                                                  \
        long long rc_ = (long long)(expr);                                                \
        long long want_ = (long long)(want);                                              \
        if (rc_ != want_) {                                                               \
            fprintf(stderr, "  %s:%d: %s returned %lld (%s), want %lld (%s)\n  last error: %s\n", \
                    __FILE__, __LINE__, #expr, rc_, zsmem_strerror((int)rc_), want_,       \
                    zsmem_strerror((int)want_), zsmem_last_error_message());              \
            check_failures++;                                                             \
        }                                                                                 \
    } while (0)

/* The last error message must start with `prefix`. */
#define CHECK_MSG(prefix)                                                               \
    do {                                                                                \
        const char *m_ = zsmem_last_error_message();                                    \
        if (strncmp(m_, (prefix), strlen(prefix)) != 0) {                               \
            fprintf(stderr, "  %s:%d: last error \"%s\" does not start with \"%s\"\n", \
                    __FILE__, __LINE__, m_, (prefix));                                  \
            check_failures++;                                                           \
        }                                                                               \
    } while (0)

static zsmem_pool *new_pool(size_t memory_limit) {
    zsmem_pool_config cfg;
    zsmem_pool *pool = NULL;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.memory_limit = memory_limit;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    return pool;
}

static void text_page(unsigned char *page, size_t len, int seed) {
    char line[64];
    int n = snprintf(line, sizeof line, "int f%d(void) { return %d; }\n", seed, seed);
    for (size_t i = 0; i < len; i++) page[i] = (unsigned char)line[i % (size_t)n];
    page[0] = (unsigned char)seed;
}

static void noise_page(unsigned char *page, size_t len, uint64_t seed) {
    uint64_t x = seed | (1ull << 40);
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        page[i] = (unsigned char)(x >> 24);
    }
}

static int all_bytes(const unsigned char *p, size_t len, unsigned char b) {
    for (size_t i = 0; i < len; i++)
        if (p[i] != b) return 0;
    return 1;
}

static void test_version(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ZSMEM_VERSION_MAJOR, ZSMEM_VERSION_MINOR,
             ZSMEM_VERSION_PATCH);
    CHECK(strcmp(zsmem_version(), want) == 0);
}

/* Reads with and without the class lock (`locked_reads` 1 and 0). */
static void pool_round_trip(uint32_t locked_reads) {
    zsmem_pool_config cfg;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.locked_reads == 0);
    cfg.locked_reads = locked_reads;
    CHECK(cfg.size == sizeof cfg);
    CHECK(cfg.page_size == 4096 && cfg.chain_size == 32 && cfg.class_delta == 16);
    CHECK(cfg.trim_pages == 1 && cfg.compaction_min_pages == 1);
    CHECK(cfg.memory_limit == 0 && cfg.compaction == ZSMEM_COMPACTION_AUTO);
    CHECK(cfg.chain_rule == ZSMEM_CHAIN_RULE_TRIM && cfg.kernel_handle_header == 0);
    zsmem_pool *pool = NULL;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    CHECK(pool != NULL);

    uint64_t h1 = 0, h2 = 0;
    CHECK_RC(zsmem_pool_store(pool, "compressed bytes", 16, &h1), 0);
    CHECK(h1 != 0);
    CHECK_RC(zsmem_pool_object_len(pool, h1), 16);
    char buf[64] = {0};
    CHECK_RC(zsmem_pool_read(pool, h1, buf, sizeof buf, NULL), 16);
    CHECK(memcmp(buf, "compressed bytes", 16) == 0);

    unsigned char data[1000], back[4096];
    memset(data, 7, sizeof data);
    CHECK_RC(zsmem_pool_alloc(pool, sizeof data, &h2), 0);
    CHECK_RC(zsmem_pool_write(pool, h2, data, sizeof data), 0);
    CHECK_RC(zsmem_pool_write_at(pool, h2, 998, "xy", 2), 0);
    CHECK_RC(zsmem_pool_read(pool, h2, back, sizeof back, NULL), 1000);
    CHECK(all_bytes(back, 998, 7) && back[998] == 'x' && back[999] == 'y');

    zsmem_pool_stats st;
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.objects == 2 && st.bytes_stored == 1016 && st.page_size == 4096);
    CHECK(st.pages_held >= 1 && st.bytes_held == st.pages_held * 4096 && st.metadata_bytes > 0);

    int n = zsmem_pool_class_stats(pool, NULL, 0);
    CHECK(n > 100);
    zsmem_class_stats *classes = calloc((size_t)n, sizeof *classes);
    CHECK_RC(zsmem_pool_class_stats(pool, classes, (size_t)n), n);
    uint64_t used = 0;
    for (int i = 0; i < n; i++) {
        used += classes[i].obj_used;
        if (i > 0) CHECK(classes[i - 1].size < classes[i].size);
    }
    CHECK(used == 2);
    free(classes);

    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    CHECK_RC(zsmem_pool_free(pool, h1), 0);
    CHECK_RC(zsmem_pool_free(pool, h2), 0);
    CHECK(zsmem_pool_compact(pool) >= 0);
    CHECK_RC(zsmem_pool_trim(pool), 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.objects == 0 && st.pages_held == 0 && st.cached_pages == 0);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

static void test_pool_round_trip(void) {
    pool_round_trip(0);
    pool_round_trip(1);
}

/* Compaction frees pages and handles stay valid. */
static void test_compaction_keeps_handles(void) {
    zsmem_pool_config cfg;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.compaction = ZSMEM_COMPACTION_OFF;
    zsmem_pool *pool = NULL;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    enum { N = 2000 };
    static uint64_t h[N];
    unsigned char obj[200], back[200];
    for (int i = 0; i < N; i++) {
        memset(obj, i & 0xff, sizeof obj);
        CHECK_RC(zsmem_pool_store(pool, obj, sizeof obj, &h[i]), 0);
    }
    for (int i = 0; i < N; i++)
        if (i % 4 != 0) CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    zsmem_pool_stats before, after;
    CHECK_RC(zsmem_pool_get_stats(pool, &before, sizeof before), 0);
    int64_t freed = zsmem_pool_compact(pool);
    CHECK(freed > 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &after, sizeof after), 0);
    CHECK(after.pages_held + (uint64_t)freed == before.pages_held);
    CHECK(after.pages_compacted == (uint64_t)freed && after.objects_moved > 0);
    for (int i = 0; i < N; i += 4) {
        CHECK_RC(zsmem_pool_read(pool, h[i], back, sizeof back, NULL), 200);
        CHECK(all_bytes(back, sizeof back, (unsigned char)(i & 0xff)));
        CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    }
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

static void test_null_arguments(void) {
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK_RC(zsmem_store_config_default(&scfg), 0);
    zsmem_pool *pool = new_pool(0);
    zsmem_pool *p = NULL;
    zsmem_store *s = NULL;
    uint64_t h = 0, out = 0;
    char buf[8];
    zsmem_pool_stats st;
    zsmem_mm_stat mm;
    CHECK_RC(zsmem_pool_store(pool, "x", 1, &h), 0);

    CHECK_RC(zsmem_pool_config_init(NULL, sizeof cfg), -EINVAL);
    CHECK_MSG("zsmem_pool_config_init: config is NULL");
    CHECK_RC(zsmem_store_config_init(NULL, sizeof scfg), -EINVAL);
    CHECK_RC(zsmem_pool_new(NULL, &p), -EINVAL);
    CHECK_RC(zsmem_pool_new(&cfg, NULL), -EINVAL);
    CHECK_RC(zsmem_pool_alloc(NULL, 1, &out), -EINVAL);
    CHECK_MSG("zsmem_pool_alloc: pool is NULL");
    CHECK_RC(zsmem_pool_alloc(pool, 1, NULL), -EINVAL);
    CHECK_RC(zsmem_pool_store(NULL, "x", 1, &out), -EINVAL);
    CHECK_RC(zsmem_pool_store(pool, NULL, 1, &out), -EINVAL);
    CHECK_MSG("zsmem_pool_store: data is NULL");
    CHECK_RC(zsmem_pool_store(pool, "x", 1, NULL), -EINVAL);
    CHECK_RC(zsmem_pool_write(NULL, h, "x", 1), -EINVAL);
    CHECK_RC(zsmem_pool_write(pool, h, NULL, 1), -EINVAL);
    CHECK_RC(zsmem_pool_write_at(NULL, h, 0, "x", 1), -EINVAL);
    CHECK_RC(zsmem_pool_write_at(pool, h, 0, NULL, 1), -EINVAL);
    CHECK_RC(zsmem_pool_read(NULL, h, buf, sizeof buf, NULL), -EINVAL);
    CHECK_RC(zsmem_pool_read(pool, h, NULL, sizeof buf, NULL), -EINVAL);
    CHECK_RC(zsmem_pool_object_len(NULL, h), -EINVAL);
    CHECK_RC(zsmem_pool_free(NULL, h), -EINVAL);
    CHECK_RC(zsmem_pool_compact(NULL), -EINVAL);
    CHECK_RC(zsmem_pool_trim(NULL), -EINVAL);
    CHECK_RC(zsmem_pool_check_invariants(NULL), -EINVAL);
    CHECK_RC(zsmem_pool_get_stats(NULL, &st, sizeof st), -EINVAL);
    CHECK_RC(zsmem_pool_get_stats(pool, NULL, sizeof st), -EINVAL);
    CHECK_RC(zsmem_pool_class_stats(NULL, NULL, 0), -EINVAL);
    CHECK_RC(zsmem_pool_class_stats(pool, NULL, 3), -EINVAL);
    CHECK_RC(zsmem_store_new(NULL, &cfg, &s), -EINVAL);
    CHECK_RC(zsmem_store_new(&scfg, NULL, &s), -EINVAL);
    CHECK_RC(zsmem_store_new(&scfg, &cfg, NULL), -EINVAL);
    CHECK_RC(zsmem_store_write(NULL, 0, buf, 4096), -EINVAL);
    CHECK_RC(zsmem_store_read(NULL, 0, buf, 4096), -EINVAL);
    CHECK_RC(zsmem_store_discard(NULL, 0, 1), -EINVAL);
    CHECK_RC(zsmem_store_compact(NULL), -EINVAL);
    CHECK_RC(zsmem_store_mm_stat(NULL, &mm), -EINVAL);
    CHECK_MSG("zsmem_store_mm_stat: store is NULL");
    CHECK(p == NULL && s == NULL && out == 0);
    /* The destructors ignore NULL, as free() does. */
    zsmem_pool_destroy(NULL);
    zsmem_store_destroy(NULL);
    /* Nothing above touched the pool's object. */
    CHECK_RC(zsmem_pool_read(pool, h, buf, sizeof buf, NULL), 1);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

static void test_handle_misuse(void) {
    zsmem_pool *pool = new_pool(0);
    zsmem_pool *other = new_pool(0);
    uint64_t h = 0, h2 = 0;
    char buf[16];
    CHECK_RC(zsmem_pool_store(pool, "first", 5, &h), 0);
    CHECK_RC(zsmem_pool_free(pool, h), 0);
    /* Double free and use after free. */
    CHECK_RC(zsmem_pool_free(pool, h), -EBADF);
    CHECK_MSG("zsmem_pool_free: invalid handle");
    CHECK_RC(zsmem_pool_read(pool, h, buf, sizeof buf, NULL), -EBADF);
    CHECK_RC(zsmem_pool_object_len(pool, h), -EBADF);
    CHECK_RC(zsmem_pool_write(pool, h, "x", 1), -EBADF);
    /* The slot reused: the old handle is stale, never the new object. */
    CHECK_RC(zsmem_pool_store(pool, "second", 6, &h2), 0);
    CHECK(h2 != h);
    CHECK_RC(zsmem_pool_read(pool, h, buf, sizeof buf, NULL), -EBADF);
    CHECK(strstr(zsmem_last_error_message(), "stale") != NULL);
    /* Forged values, and a handle of another pool. */
    const uint64_t forged[] = {0, UINT64_MAX, h2 ^ (1ull << 20), h2 + 1};
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        CHECK_RC(zsmem_pool_read(pool, forged[i], buf, sizeof buf, NULL), -EBADF);
        CHECK_RC(zsmem_pool_free(pool, forged[i]), -EBADF);
    }
    CHECK_RC(zsmem_pool_read(other, h2, buf, sizeof buf, NULL), -EBADF);
    CHECK_RC(zsmem_pool_read(pool, h2, buf, sizeof buf, NULL), 6);
    CHECK(memcmp(buf, "second", 6) == 0);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(other);
    zsmem_pool_destroy(pool);
}

/* Two pools with the same objects in the same order: each object has the
 * same class, slot and generation in both, and still a handle of one pool is
 * -EBADF on the other, for every call, and changes nothing there. */
static void test_cross_pool_handles(void) {
    zsmem_pool *a = new_pool(0);
    zsmem_pool *b = new_pool(0);
    uint64_t ha[8], hb[8];
    char buf[64], want[64];
    for (int i = 0; i < 8; i++) {
        snprintf(want, sizeof want, "pool a object %d", i);
        CHECK_RC(zsmem_pool_store(a, want, strlen(want), &ha[i]), 0);
        snprintf(want, sizeof want, "pool b object %d", i);
        CHECK_RC(zsmem_pool_store(b, want, strlen(want), &hb[i]), 0);
        CHECK(ha[i] != hb[i]);
    }
    for (int i = 0; i < 8; i++) {
        CHECK_RC(zsmem_pool_read(b, ha[i], buf, sizeof buf, NULL), -EBADF);
        CHECK(strstr(zsmem_last_error_message(), "another pool") != NULL);
        CHECK_RC(zsmem_pool_object_len(b, ha[i]), -EBADF);
        CHECK_RC(zsmem_pool_write(b, ha[i], "XXXX", 4), -EBADF);
        CHECK_RC(zsmem_pool_free(b, ha[i]), -EBADF);
        CHECK_RC(zsmem_pool_free(a, hb[i]), -EBADF);
    }
    /* Both pools' objects untouched, and all still there. */
    for (int i = 0; i < 8; i++) {
        int n = snprintf(want, sizeof want, "pool b object %d", i);
        CHECK_RC(zsmem_pool_read(b, hb[i], buf, sizeof buf, NULL), n);
        CHECK(memcmp(buf, want, (size_t)n) == 0);
        n = snprintf(want, sizeof want, "pool a object %d", i);
        CHECK_RC(zsmem_pool_read(a, ha[i], buf, sizeof buf, NULL), n);
        CHECK(memcmp(buf, want, (size_t)n) == 0);
    }
    zsmem_pool_stats s;
    CHECK_RC(zsmem_pool_get_stats(b, &s, sizeof s), 0);
    CHECK(s.objects == 8);
    CHECK_RC(zsmem_pool_check_invariants(a), 0);
    CHECK_RC(zsmem_pool_check_invariants(b), 0);
    zsmem_pool_destroy(b);
    zsmem_pool_destroy(a);
}

static void test_lengths(void) {
    zsmem_pool *pool = new_pool(0);
    uint64_t h = 0;
    static unsigned char big[5000];
    CHECK_RC(zsmem_pool_alloc(pool, 0, &h), -EINVAL);
    CHECK_RC(zsmem_pool_alloc(pool, 4097, &h), -E2BIG);
    CHECK(strstr(zsmem_last_error_message(), "4097") != NULL);
    CHECK_RC(zsmem_pool_store(pool, big, sizeof big, &h), -E2BIG);
    CHECK(h == 0);
    CHECK_RC(zsmem_pool_alloc(pool, 4096, &h), 0);
    CHECK_RC(zsmem_pool_free(pool, h), 0);

    unsigned char obj[100], small[99], back[100];
    memset(obj, 9, sizeof obj);
    CHECK_RC(zsmem_pool_store(pool, obj, sizeof obj, &h), 0);
    CHECK_RC(zsmem_pool_write_at(pool, h, 99, "ab", 2), -EMSGSIZE);
    CHECK_RC(zsmem_pool_write(pool, h, big, 101), -EMSGSIZE);
    size_t needed = 0;
    memset(small, 0xEE, sizeof small);
    CHECK_RC(zsmem_pool_read(pool, h, small, sizeof small, &needed), -ENOBUFS);
    CHECK(needed == 100);
    CHECK(all_bytes(small, sizeof small, 0xEE)); /* untouched */
    CHECK_MSG("zsmem_pool_read: read buffer of 99 bytes");
    CHECK_RC(zsmem_pool_read(pool, h, small, sizeof small, NULL), -ENOBUFS);
    /* Nothing changed. */
    CHECK_RC(zsmem_pool_read(pool, h, back, needed, NULL), 100);
    CHECK(all_bytes(back, sizeof back, 9));
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

static void test_memory_limit(void) {
    zsmem_pool *pool = new_pool(4 * 4096);
    static unsigned char page[4096];
    memset(page, 5, sizeof page);
    int stored = 0, rc;
    uint64_t h;
    while ((rc = zsmem_pool_store(pool, page, sizeof page, &h)) == 0) stored++;
    CHECK_RC(rc, -ENOMEM);
    CHECK(strstr(zsmem_last_error_message(), "memory limit") != NULL);
    CHECK(stored == 4); /* page-sized objects take one page each */
    zsmem_pool_stats st;
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.pages_held == 4 && st.objects == 4);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

static int pool_new_rc(const zsmem_pool_config *cfg) {
    zsmem_pool *p = NULL;
    int rc = zsmem_pool_new(cfg, &p);
    CHECK(p == NULL || rc == 0);
    zsmem_pool_destroy(p);
    return rc;
}

static void test_bad_configurations(void) {
    zsmem_pool_config cfg;
    memset(&cfg, 0, sizeof cfg); /* never initialised */
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    CHECK_MSG("zsmem_pool_new: config has size 0");

    zsmem_pool_config_default(&cfg);
    cfg.page_size = 5000;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration");
    zsmem_pool_config_default(&cfg);
    cfg.chain_size = 33;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.class_delta = 12;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.chain_rule = 7;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.kernel_handle_header = 2;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.compaction = 5;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.compaction_max_moves = 0;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.compaction_min_pages = 0;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.trim_pages = 2;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    zsmem_pool_config_default(&cfg);
    cfg.locked_reads = 2;
    CHECK_RC(pool_new_rc(&cfg), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: locked_reads is 2, not 0 or 1");
    CHECK_RC(zsmem_pool_config_init(&cfg, 8), -EINVAL); /* no such struct size */

    /* The kernel's configuration and the other chain rules are accepted. */
    zsmem_pool_config_default(&cfg);
    cfg.chain_size = 8;
    cfg.chain_rule = ZSMEM_CHAIN_RULE_MIN_WASTE;
    cfg.kernel_handle_header = 1;
    cfg.compaction = ZSMEM_COMPACTION_OFF;
    cfg.trim_pages = 0;
    CHECK_RC(pool_new_rc(&cfg), 0);
    cfg.chain_rule = ZSMEM_CHAIN_RULE_SPAN_AWARE;
    cfg.page_size = 16384;
    CHECK_RC(pool_new_rc(&cfg), 0);
    cfg.chain_rule = ZSMEM_CHAIN_RULE_USED_PERCENT;
    CHECK_RC(pool_new_rc(&cfg), 0);

    /* Store configurations. */
    zsmem_store_config scfg;
    zsmem_store *s = NULL;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    CHECK(scfg.size == sizeof scfg && scfg.codec == ZSMEM_CODEC_LZ4 && scfg.zstd_level == 3);
    scfg.slots = 0;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    zsmem_store_config_default(&scfg);
    scfg.codec = 9;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    CHECK_MSG("zsmem_store_new: invalid configuration: codec 9");
    scfg.codec = ZSMEM_CODEC_ZSTD;
    scfg.zstd_level = 0;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    scfg.zstd_level = 23;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    memset(&scfg, 0, sizeof scfg);
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    zsmem_store_config_default(&scfg);
    cfg.page_size = 3;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &s), -EINVAL);
    CHECK(s == NULL);
}

static void test_store(void) {
    static unsigned char page[4096], out[4096];
    for (int codec = ZSMEM_CODEC_LZ4; codec <= ZSMEM_CODEC_ZSTD; codec++) {
        zsmem_pool_config cfg;
        zsmem_store_config scfg;
        zsmem_store *store = NULL;
        zsmem_mm_stat mm;
        zsmem_pool_config_default(&cfg);
        zsmem_store_config_default(&scfg);
        scfg.slots = 16;
        scfg.codec = (uint32_t)codec;
        CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);

        memset(page, 0, sizeof page);
        CHECK_RC(zsmem_store_write(store, 0, page, sizeof page), 0); /* same-filled */
        text_page(page, sizeof page, 1);
        CHECK_RC(zsmem_store_write(store, 1, page, sizeof page), 0);
        noise_page(page, sizeof page, 7);
        CHECK_RC(zsmem_store_write(store, 2, page, sizeof page), 0); /* huge */
        text_page(page, sizeof page, 15);
        CHECK_RC(zsmem_store_write(store, 15, page, sizeof page), 0);

        text_page(page, sizeof page, 1);
        CHECK_RC(zsmem_store_read(store, 1, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
        noise_page(page, sizeof page, 7);
        CHECK_RC(zsmem_store_read(store, 2, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
        memset(out, 0xAA, sizeof out);
        CHECK_RC(zsmem_store_read(store, 3, out, sizeof out), 0); /* never written */
        CHECK(all_bytes(out, sizeof out, 0));

        CHECK_RC(zsmem_store_mm_stat(store, &mm), 0);
        CHECK(mm.orig_data_size == 4 * 4096);
        CHECK(mm.same_pages == 1 && mm.huge_pages == 1 && mm.huge_pages_since == 1);
        CHECK(mm.compr_data_size > 4096 && mm.compr_data_size < 4096 + 1000);
        CHECK(mm.mem_used_total % 4096 == 0 && mm.mem_used_max >= mm.mem_used_total);
        CHECK(mm.mem_limit == 0);

        CHECK_RC(zsmem_store_discard(store, 0, 3), 0);
        CHECK_RC(zsmem_store_read(store, 1, out, sizeof out), 0);
        CHECK(all_bytes(out, sizeof out, 0));
        CHECK(zsmem_store_compact(store) >= 0);
        CHECK_RC(zsmem_store_mm_stat(store, &mm), 0);
        CHECK(mm.orig_data_size == 4096 && mm.same_pages == 0 && mm.huge_pages == 0);

        /* Error paths. */
        CHECK_RC(zsmem_store_write(store, 16, page, sizeof page), -ERANGE);
        CHECK_MSG("zsmem_store_write: slot 16 is out of range");
        CHECK_RC(zsmem_store_read(store, 99, out, sizeof out), -ERANGE);
        CHECK_RC(zsmem_store_discard(store, 10, 7), -ERANGE);
        CHECK_RC(zsmem_store_discard(store, SIZE_MAX, 2), -ERANGE);
        CHECK_RC(zsmem_store_write(store, 3, page, 100), -EINVAL);
        memset(out, 0x55, sizeof out);
        CHECK_RC(zsmem_store_read(store, 15, out, 4095), -EINVAL);
        CHECK(all_bytes(out, sizeof out, 0x55)); /* untouched */
        text_page(page, sizeof page, 15);
        CHECK_RC(zsmem_store_read(store, 15, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
        zsmem_store_destroy(store);
    }
}

/* What a store holds, all in, as `zsmem compare` counts it, and its trim:
   a C program can measure and settle its memory. */
static void test_store_memory(void) {
    static unsigned char page[4096];
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_store_memory m;
    zsmem_mm_stat mm;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    scfg.slots = 1024;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    for (size_t i = 0; i < 1024; i++) {
        text_page(page, sizeof page, (int)i);
        CHECK_RC(zsmem_store_write(store, i, page, sizeof page), 0);
    }
    CHECK_RC(zsmem_store_get_memory(store, &m, sizeof m), 0);
    CHECK_RC(zsmem_store_mm_stat(store, &mm), 0);
    CHECK(m.pool_bytes == mm.mem_used_total && m.compr_data_size == mm.compr_data_size);
    CHECK(m.metadata_bytes > 0);
    CHECK(m.all_in_bytes == m.pool_bytes + m.cached_bytes + m.metadata_bytes);
    CHECK_RC(zsmem_store_discard(store, 0, 1024), 0);
    CHECK_RC(zsmem_store_trim(store), 0);
    CHECK_RC(zsmem_store_get_memory(store, &m, sizeof m), 0);
    CHECK(m.pool_bytes == 0 && m.cached_bytes == 0 && m.compr_data_size == 0);
    CHECK_RC(zsmem_store_get_memory(store, NULL, sizeof m), -EINVAL);
    zsmem_store_destroy(store);
    CHECK_RC(zsmem_store_trim(store), -EINVAL);
    CHECK_RC(zsmem_store_get_memory(store, &m, sizeof m), -EINVAL);
}

static void test_store_memory_limit(void) {
    static unsigned char page[4096], out[4096];
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_mm_stat mm;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    scfg.slots = 64;
    cfg.memory_limit = 2 * 4096;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    noise_page(page, sizeof page, 0);
    CHECK_RC(zsmem_store_write(store, 0, page, sizeof page), 0);
    noise_page(page, sizeof page, 1);
    CHECK_RC(zsmem_store_write(store, 1, page, sizeof page), 0);
    noise_page(page, sizeof page, 2);
    CHECK_RC(zsmem_store_write(store, 0, page, sizeof page), -ENOMEM);
    /* The refused overwrite kept the old page. */
    noise_page(page, sizeof page, 0);
    CHECK_RC(zsmem_store_read(store, 0, out, sizeof out), 0);
    CHECK(memcmp(out, page, sizeof page) == 0);
    CHECK_RC(zsmem_store_mm_stat(store, &mm), 0);
    CHECK(mm.mem_limit == 2 * 4096 && mm.mem_used_total == 2 * 4096);
    zsmem_store_destroy(store);
}

static void *fail_once(void *arg) {
    (void)arg;
    /* A fresh thread has no error yet; its own failure stays its own. */
    int empty = zsmem_last_error_message()[0] == '\0';
    int rc = zsmem_pool_free(NULL, 1);
    int own = strcmp(zsmem_last_error_message(), "zsmem_pool_free: pool is NULL") == 0;
    return (void *)(intptr_t)(empty && rc == -EINVAL && own);
}

/* Issue 16: slot counts no memory can hold aborted the process (2^32) or
 * came back as "a bug in zsmem" (SIZE_MAX); now they are -ENOMEM. Placed
 * by size class (log placement refuses them sooner: test_log_slot_limit). */
static void test_huge_slot_counts(void) {
    size_t counts[] = {SIZE_MAX, SIZE_MAX / 2, (size_t)1 << 44};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        zsmem_pool_config cfg;
        zsmem_store_config scfg;
        zsmem_store *store = NULL;
        zsmem_pool_config_default(&cfg);
        cfg.placement = ZSMEM_PLACEMENT_CLASSES;
        zsmem_store_config_default(&scfg);
        scfg.slots = counts[i];
        CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -ENOMEM);
        CHECK(store == NULL);
        CHECK(strstr(zsmem_last_error_message(), "slot table") != NULL);
    }
}

/* Issue 32: with log placement a segment names each object's slot in 31
 * bits. Stores of 2^31 to 2^32 - 1 slots were accepted, and the objects of
 * the slots at or above 2^31 were never moved nor their segments given
 * back. Refused now, the message naming the limit. */
static void test_log_slot_limit(void) {
#if SIZE_MAX > UINT32_MAX
    size_t counts[] = {((size_t)1 << 31) + 1, (size_t)UINT32_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        zsmem_pool_config cfg;
        zsmem_store_config scfg;
        zsmem_store *store = NULL;
        zsmem_pool_config_default(&cfg);
        zsmem_store_config_default(&scfg);
        cfg.log_lanes = 1;
        scfg.slots = counts[i];
        CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -EINVAL);
        CHECK(store == NULL);
        CHECK(strstr(zsmem_last_error_message(), "at most 2147483648") != NULL);
        zsmem_store_destroy(store); /* NULL, or the store wrongly made */
    }
#endif
}

/* Issue 16: calls after destroy said "a bug in zsmem", a double destroy or
 * stats after destroy hung, and destroy while another thread used the pool
 * crashed. Pointers are now looked up in a registry, never dereferenced. */
static void test_use_after_destroy(void) {
    zsmem_pool *pool = new_pool(0);
    uint64_t h;
    zsmem_pool_stats st;
    CHECK_RC(zsmem_pool_store(pool, "abc", 3, &h), 0);
    zsmem_pool_destroy(pool);
    CHECK_RC(zsmem_pool_store(pool, "abc", 3, &h), -EINVAL);
    CHECK_MSG("zsmem_pool_store: pool ");
    CHECK(strstr(zsmem_last_error_message(), "not a live pool") != NULL);
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), -EINVAL);
    CHECK_RC(zsmem_pool_free(pool, h), -EINVAL);
    CHECK_RC(zsmem_pool_compact(pool), -EINVAL);
    zsmem_pool_destroy(pool); /* a second destroy: reported, not a hang */
    CHECK_MSG("zsmem_pool_destroy: pool ");

    /* Forged pointers and a store passed as a pool. */
    int local;
    CHECK_RC(zsmem_pool_trim((zsmem_pool *)&local), -EINVAL);
    CHECK_RC(zsmem_pool_trim((zsmem_pool *)(uintptr_t)0x1234560), -EINVAL);
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    scfg.slots = 4;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    CHECK_RC(zsmem_pool_trim((zsmem_pool *)store), -EINVAL);
    zsmem_store_destroy(store);
    zsmem_mm_stat mm;
    CHECK_RC(zsmem_store_mm_stat(store, &mm), -EINVAL);
    CHECK_MSG("zsmem_store_mm_stat: store ");
    zsmem_store_destroy(store);
    CHECK_MSG("zsmem_store_destroy: store ");
}

struct racer {
    zsmem_pool *pool;
    long ok, refused, other;
};

static void *race_calls(void *arg) {
    struct racer *r = arg;
    unsigned char buf[64];
    for (;;) {
        uint64_t h;
        int rc = zsmem_pool_store(r->pool, "0123456789abcdef", 16, &h);
        if (rc == 0)
            rc = zsmem_pool_read(r->pool, h, buf, sizeof buf, NULL);
        /* -EINVAL once the destroy has happened, between any two calls. */
        if (rc == -EINVAL)
            break;
        if (rc != 16 || memcmp(buf, "0123456789abcdef", 16) != 0) {
            r->other++;
            break;
        }
        __atomic_fetch_add(&r->ok, 1, __ATOMIC_RELAXED);
    }
    r->refused++;
    return NULL;
}

static void test_destroy_while_in_use(void) {
    struct racer r[4];
    pthread_t t[4];
    zsmem_pool *pool = new_pool(0);
    for (int i = 0; i < 4; i++) {
        r[i] = (struct racer){pool, 0, 0, 0};
        CHECK(pthread_create(&t[i], NULL, race_calls, &r[i]) == 0);
    }
    /* Let the threads get going, then pull the pool from under them. */
    for (;;) {
        long done = 0;
        for (int i = 0; i < 4; i++) done += __atomic_load_n(&r[i].ok, __ATOMIC_RELAXED);
        if (done > 1000) break;
        sched_yield();
    }
    zsmem_pool_destroy(pool);
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(r[i].refused == 1 && r[i].other == 0);
    }
}

static void test_errors_and_messages(void) {
    const int codes[] = {0,       -EINVAL, -E2BIG,  -EMSGSIZE, -ENOBUFS,        -ENOMEM,
                         -EMFILE, -EBADF,  -ERANGE, -EIO,      -ENOTRECOVERABLE};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = zsmem_strerror(codes[i]);
        CHECK(s != NULL && s[0] != '\0');
        CHECK(strcmp(s, zsmem_strerror(-codes[i])) == 0);
        CHECK(strcmp(s, "unknown error code") != 0);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(s, zsmem_strerror(codes[j])) != 0);
    }
    CHECK(strcmp(zsmem_strerror(12345), "unknown error code") == 0);
    CHECK(strcmp(zsmem_strerror(-2147483647 - 1), "unknown error code") == 0);

    CHECK_RC(zsmem_pool_trim(NULL), -EINVAL);
    CHECK_MSG("zsmem_pool_trim: pool is NULL");
    pthread_t t;
    void *ok = NULL;
    CHECK(pthread_create(&t, NULL, fail_once, NULL) == 0);
    CHECK(pthread_join(t, &ok) == 0);
    CHECK(ok == (void *)1);
    /* The other thread's failure did not replace this thread's message, and
     * a success leaves it alone. */
    CHECK_MSG("zsmem_pool_trim: pool is NULL");
    zsmem_pool *pool = new_pool(0);
    CHECK_MSG("zsmem_pool_trim: pool is NULL");
    zsmem_pool_destroy(pool);
}

struct worker {
    zsmem_pool *pool;
    uint64_t seed;
    long ops;
    long failures;
};

struct live {
    uint64_t handle;
    size_t len;
    unsigned char fill;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    enum { MAX_LIVE = 256 };
    struct live live[MAX_LIVE];
    size_t n = 0;
    unsigned char *buf = malloc(4096), *data = malloc(4096);
    uint64_t x = w->seed | 1;
    for (long i = 0; i < w->ops; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (n == MAX_LIVE || (x % 3 == 0 && n > 0)) {
            size_t k = (size_t)(x % n);
            struct live l = live[k];
            live[k] = live[--n];
            int got = zsmem_pool_read(w->pool, l.handle, buf, 4096, NULL);
            if (got != (int)l.len || !all_bytes(buf, l.len, l.fill)) w->failures++;
            if (zsmem_pool_free(w->pool, l.handle) != 0) w->failures++;
            /* The freed handle is dead at once. */
            if (zsmem_pool_object_len(w->pool, l.handle) != -EBADF) w->failures++;
        } else {
            size_t len = 1 + (size_t)((x >> 8) % 4096);
            unsigned char fill = (unsigned char)(x >> 32);
            memset(data, fill, len);
            uint64_t h = 0;
            /* Half through store, half through alloc + write_at in two parts. */
            if (x & 1) {
                if (zsmem_pool_store(w->pool, data, len, &h) != 0) w->failures++;
            } else {
                size_t half = len / 2;
                if (zsmem_pool_alloc(w->pool, len, &h) != 0 ||
                    zsmem_pool_write_at(w->pool, h, half, data + half, len - half) != 0 ||
                    (half > 0 && zsmem_pool_write(w->pool, h, data, half) != 0))
                    w->failures++;
            }
            live[n++] = (struct live){h, len, fill};
        }
    }
    while (n > 0) {
        struct live l = live[--n];
        int got = zsmem_pool_read(w->pool, l.handle, buf, 4096, NULL);
        if (got != (int)l.len || !all_bytes(buf, l.len, l.fill)) w->failures++;
        if (zsmem_pool_free(w->pool, l.handle) != 0) w->failures++;
    }
    free(buf);
    free(data);
    return NULL;
}

static void test_threads(void) {
    enum { THREADS = 4 };
    const char *env = getenv("ZSMEM_TEST_OPS");
    long ops = env ? atol(env) : 20000;
    zsmem_pool *pool = new_pool(0);
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){pool, 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1), ops, 0};
        CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        CHECK(w[i].failures == 0);
    }
    zsmem_pool_stats st;
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.objects == 0 && st.bytes_stored == 0);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    zsmem_pool_destroy(pool);
}

/* Deferred free: a freed handle is dead at once, the object goes when its
 * batch is drained or at zsmem_pool_flush. */
static void test_deferred_free(void) {
    zsmem_pool_config cfg;
    zsmem_pool *pool = NULL;
    zsmem_pool_stats st;
    uint64_t h[64];
    unsigned char buf[300];
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.free_mode == ZSMEM_FREE_CLASS_LOCK && cfg.free_max_pending_bytes == 4 << 20);
    cfg.free_mode = ZSMEM_FREE_DEFERRED;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    for (int i = 0; i < 64; i++) {
        memset(buf, i, sizeof buf);
        CHECK_RC(zsmem_pool_store(pool, buf, sizeof buf, &h[i]), 0);
    }
    for (int i = 0; i < 64; i += 2) CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    CHECK_RC(zsmem_pool_free(pool, h[0]), -EBADF);                 /* already dead */
    CHECK_RC(zsmem_pool_read(pool, h[2], buf, sizeof buf, NULL), -EBADF);
    /* Before the drain the freed objects are still counted, and the stats
       say how many of them wait (a review found objects reading 104 after
       1000 frees, with nothing to explain it). */
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.objects - st.pending_frees == 32);
    CHECK(st.pending_frees == 0 || st.pending_free_bytes >= st.pending_frees * sizeof buf);
    CHECK_RC(zsmem_pool_flush(pool), 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.objects == 32 && st.bytes_stored == 32 * sizeof buf);
    CHECK(st.pending_frees == 0 && st.pending_free_bytes == 0);
    for (int i = 1; i < 64; i += 2) {
        CHECK_RC(zsmem_pool_read(pool, h[i], buf, sizeof buf, NULL), (int)sizeof buf);
        CHECK(all_bytes(buf, sizeof buf, (unsigned char)i));
        CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    }
    CHECK_RC(zsmem_pool_flush(pool), 0);
    CHECK_RC(zsmem_pool_check_invariants(pool), 0);
    CHECK_RC(zsmem_pool_flush(NULL), -EINVAL);
    zsmem_pool_destroy(pool);

    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.free_mode = 7;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: free_mode 7");
    cfg.free_mode = ZSMEM_FREE_DEFERRED;
    cfg.free_max_pending_bytes = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.log_lanes = 65;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: log placement: 65 lanes");
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.class_shards >= 1 && cfg.class_shards <= 8);
    cfg.class_shards = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: class_shards 0 is not in 1..=16");
    cfg.class_shards = 16;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    /* The version before class_shards: the default. */
    cfg.size = offsetof(zsmem_pool_config, class_shards);
    cfg.class_shards = 0; /* beyond the old struct: never read */
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    /* Pages faulted in ahead (log placement): 1 MiB a lane by default, 0
       turns it off; the version before prefault_bytes gets the default. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.prefault_bytes == 1 << 20);
    cfg.log_lanes = 1;
    cfg.prefault_bytes = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    cfg.size = offsetof(zsmem_pool_config, prefault_bytes);
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    /* Parked slots (size classes): 16 by default, 0 turns them off, more
       than 64 is refused; the version before parked_slots gets the
       default. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.parked_slots == 16);
    cfg.parked_slots = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    cfg.parked_slots = 65;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: parked_slots 65 is more than 64");
    cfg.size = offsetof(zsmem_pool_config, parked_slots);
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    /* Log placement: no size classes, objects packed in segments. */
    cfg.log_lanes = 2;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    {
        uint64_t h = 0;
        unsigned char data[1000], out[1000];
        size_t needed = 0;
        memset(data, 0x5a, sizeof data);
        CHECK_RC(zsmem_pool_store(pool, data, sizeof data, &h), 0);
        CHECK_RC(zsmem_pool_read(pool, h, out, sizeof out, &needed), 1000);
        CHECK(memcmp(data, out, sizeof data) == 0);
        CHECK_RC(zsmem_pool_free(pool, h), 0);
    }
    zsmem_pool_destroy(pool);
    pool = NULL;
}

/* A program built against the first header passes a shorter struct: the
 * appended fields keep their defaults. */
/* Page return: freed pages wait in the return queue (counted as cached)
 * unless return_delay_us is 0; zsmem_pool_trim returns them now. */
static void test_page_return(void) {
    zsmem_pool_config cfg;
    zsmem_pool *pool = NULL;
    zsmem_pool_stats st;
    unsigned char buf[3000];
    uint64_t h;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.return_delay_us == 10000 && cfg.return_max_pages == 1024);
    for (int immediate = 0; immediate < 2; immediate++) {
        cfg.return_delay_us = immediate ? 0 : 60u * 1000 * 1000; /* a minute: no race with the returner */
        CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
        memset(buf, 7, sizeof buf);
        CHECK_RC(zsmem_pool_store(pool, buf, sizeof buf, &h), 0);
        CHECK_RC(zsmem_pool_free(pool, h), 0);
        CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
        CHECK(st.pages_held == 0 && st.cached_pages == (immediate ? 0u : 1u));
        CHECK_RC(zsmem_pool_trim(pool), 0);
        CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
        CHECK(st.cached_pages == 0);
        zsmem_pool_destroy(pool);
    }
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.return_max_pages = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    /* The version before the return fields: the default policy. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.size = offsetof(zsmem_pool_config, return_delay_us);
    cfg.return_max_pages = 0; /* beyond the old struct: never read */
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
}

static void test_older_struct_sizes(void) {
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_pool *pool = NULL;
    zsmem_store *store = NULL;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.size = offsetof(zsmem_pool_config, free_mode);
    cfg.free_mode = 99; /* beyond the old struct: never read */
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
    CHECK_RC(zsmem_store_config_default(&scfg), 0);
    scfg.size = offsetof(zsmem_store_config, recompress_codec);
    scfg.slots = 4;
    scfg.recompress_codec = 99;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    CHECK_RC(zsmem_store_recompress(store, ZSMEM_SELECT_ALL, 0), -EINVAL); /* no secondary codec */
    zsmem_store_destroy(store);
    cfg.size = offsetof(zsmem_pool_config, free_mode) - 4; /* no such version */
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
}

/* Source-like text that differs from page to page, as a dictionary needs. */
static void source_page(unsigned char *page, size_t len, int seed) {
    size_t at = 0;
    for (int i = 0; at < len; i++) {
        char line[96];
        int n = snprintf(line, sizeof line, "static int f%d_%d(int x) { return x * %d + %d; }\n",
                         seed, i, (seed * 31 + i) % 97, i * i % 1013);
        for (int j = 0; j < n && at < len; j++) page[at++] = (unsigned char)line[j];
    }
}

/* Idle marking, recompression, writeback and its limit, io_stat and
 * bd_stat, dictionaries: every page read back is checked. */
static void test_store_idle_writeback(void) {
    static unsigned char page[4096], out[4096];
    char dir[] = "/tmp/zsmem-c-test-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/backing", dir);

    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_bd_stat bd;
    zsmem_io_stat io;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    CHECK(scfg.recompress_codec == ZSMEM_CODEC_NONE);
    scfg.slots = 64;
    scfg.recompress_codec = ZSMEM_CODEC_ZSTD;
    scfg.recompress_zstd_level = 0;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -EINVAL);
    scfg.recompress_zstd_level = 12;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);

    const int n = 48;
    for (int i = 0; i < n; i++) {
        source_page(page, sizeof page, i);
        CHECK_RC(zsmem_store_write(store, (size_t)i, page, sizeof page), 0);
    }
    /* Too few pages to train from is an invalid argument, not an I/O
       error (-EIO is for data that does not decompress). */
    {
        zsmem_store_config few_cfg;
        zsmem_pool_config few_pool;
        zsmem_store *few = NULL;
        unsigned char page[4096];
        CHECK_RC(zsmem_store_config_default(&few_cfg), 0);
        CHECK_RC(zsmem_pool_config_default(&few_pool), 0);
        few_cfg.slots = 4;
        CHECK_RC(zsmem_store_new(&few_cfg, &few_pool, &few), 0);
        text_page(page, sizeof page, 1);
        CHECK_RC(zsmem_store_write(few, 0, page, sizeof page), 0);
        CHECK_RC((int)zsmem_store_train_dictionary(few, 4096, 64), -EINVAL);
        zsmem_store_destroy(few);
    }
    /* A dictionary trained from the pages stored; new pages use it. */
    long long dict = zsmem_store_train_dictionary(store, 4096, 64);
    CHECK(dict > 0 && dict <= 4096);
    if (dict < 0) fprintf(stderr, "  train: %s\n", zsmem_last_error_message());
    for (int i = 0; i < n; i++) {
        source_page(page, sizeof page, i + 1000);
        CHECK_RC(zsmem_store_write(store, (size_t)i, page, sizeof page), 0);
    }
    for (int i = 0; i < n; i++) {
        source_page(page, sizeof page, i + 1000);
        CHECK_RC(zsmem_store_read(store, (size_t)i, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }

    CHECK_RC(zsmem_store_writeback(store, ZSMEM_SELECT_ALL, 0), -ENODEV);
    CHECK_RC(zsmem_store_mark_idle(store, 3600), 0); /* nothing is an hour old */
    CHECK_RC(zsmem_store_mark_idle(store, 0), n);
    long long re = zsmem_store_recompress(store, ZSMEM_SELECT_IDLE, 0);
    CHECK(re >= 0 && re <= n);
    CHECK_RC(zsmem_store_recompress(store, 9, 0), -EINVAL);
    /* The one selection the header excludes (it selected nothing, 0). */
    CHECK_RC(zsmem_store_recompress(store, ZSMEM_SELECT_INCOMPRESSIBLE, 0), -EINVAL);

    CHECK_RC(zsmem_store_set_backing_file(store, NULL), -EINVAL);
    CHECK_RC(zsmem_store_set_backing_file(store, path), 0);
    CHECK_RC(zsmem_store_set_backing_file(store, path), -EINVAL); /* once per store */
    CHECK_RC(zsmem_store_set_writeback_limit(store, 2, 5), -EINVAL);
    CHECK_RC(zsmem_store_set_writeback_limit(store, 1, 5), 0);
    CHECK_RC(zsmem_store_writeback(store, ZSMEM_SELECT_IDLE, 0), 5);  /* the limit */
    CHECK_RC(zsmem_store_writeback(store, ZSMEM_SELECT_IDLE, 0), 0);
    CHECK_RC(zsmem_store_set_writeback_limit(store, 0, 0), 0);
    CHECK_RC(zsmem_store_writeback(store, ZSMEM_SELECT_IDLE, 3), 3);  /* max_pages */
    CHECK_RC(zsmem_store_writeback(store, ZSMEM_SELECT_IDLE, 0), n - 8);
    CHECK_RC(zsmem_store_bd_stat(store, &bd, sizeof bd), 0);
    CHECK(bd.bd_count == (uint64_t)n && bd.bd_writes == (uint64_t)n && bd.bd_reads == 0);

    for (int i = 0; i < n; i++) {
        source_page(page, sizeof page, i + 1000);
        CHECK_RC(zsmem_store_read(store, (size_t)i, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }
    CHECK_RC(zsmem_store_bd_stat(store, &bd, sizeof bd), 0);
    CHECK(bd.bd_reads == (uint64_t)n);

    CHECK_RC(zsmem_store_read(store, 64, out, sizeof out), -ERANGE);
    CHECK_RC(zsmem_store_discard(store, 0, 2), 0);
    CHECK_RC(zsmem_store_io_stat(store, &io, sizeof io), 0);
    CHECK(io.invalid_io == 1 && io.notify_free == 2 && io.failed_reads == 0);
    CHECK_RC(zsmem_store_io_stat(store, NULL, sizeof io), -EINVAL);
    CHECK_RC(zsmem_store_bd_stat(NULL, &bd, sizeof bd), -EINVAL);
    CHECK_RC(zsmem_store_mark_idle(NULL, 0), -EINVAL);
    zsmem_store_destroy(store);

    /* The backing file is locked while a store has it, free after. */
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    CHECK_RC(zsmem_store_set_backing_file(store, path), 0);
    zsmem_store *other = NULL;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &other), 0);
    CHECK_RC(zsmem_store_set_backing_file(other, path), -EIO);
    CHECK_MSG("zsmem_store_set_backing_file: backing file");
    zsmem_store_destroy(other);
    zsmem_store_destroy(store);
    CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

/* A pointer no _new call returned, and a pool's token passed as a store:
   both looked up, never used. */
#define FORGED_STORE ((zsmem_store *)(uintptr_t)0x7e57f00d0)
#define FORGED_POOL ((zsmem_pool *)(uintptr_t)0x7e57f00d0)

/* zsmem_pool_max_object_size and zsmem_pool_placed_size against the
 * pool's own accounting, class_grid (1 places every object in its own
 * class, so one object's rounding is placed_size - len exactly), and the
 * appended compaction and deferred-free counters. */
static void test_pool_sizes(void) {
    zsmem_pool_config cfg;
    zsmem_pool *pool = NULL;
    zsmem_pool_stats st;
    unsigned char data[4096];
    uint64_t h;
    memset(data, 0x33, sizeof data);
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK(cfg.class_grid == 2); /* Rust's PoolConfig::default() */
    cfg.class_grid = 1;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    CHECK_RC(zsmem_pool_max_object_size(pool), 4096);
    CHECK_RC(zsmem_pool_placed_size(pool, 4096), 4096);
    long long last = 0;
    int ordered = 1, fits = 1;
    for (size_t len = 1; len <= 4096; len++) {
        long long placed = zsmem_pool_placed_size(pool, len);
        fits &= placed >= (long long)len && placed % 16 == 0;
        ordered &= placed >= last;
        last = placed;
    }
    CHECK(fits && ordered);
    const size_t lens[] = {1, 100, 700, 1500, 3000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        CHECK_RC(zsmem_pool_store(pool, data, lens[i], &h), 0);
        CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
        CHECK(st.waste_rounding_bytes == (uint64_t)zsmem_pool_placed_size(pool, lens[i]) - lens[i]);
        CHECK_RC(zsmem_pool_free(pool, h), 0);
    }
    CHECK_RC(zsmem_pool_placed_size(pool, 0), -EINVAL);
    CHECK_RC(zsmem_pool_placed_size(pool, 4097), -E2BIG);
    CHECK_RC(zsmem_pool_placed_size(pool, SIZE_MAX), -E2BIG);
    CHECK_RC(zsmem_pool_placed_size(NULL, 1), -EINVAL);
    CHECK_RC(zsmem_pool_placed_size(FORGED_POOL, 1), -EINVAL);
    CHECK_MSG("zsmem_pool_placed_size: pool 0x7e57f00d0 is not a live pool");
    CHECK_RC(zsmem_pool_max_object_size(NULL), -EINVAL);
    CHECK_RC(zsmem_pool_max_object_size(FORGED_POOL), -EINVAL);
    zsmem_pool_destroy(pool);
    CHECK_RC(zsmem_pool_max_object_size(pool), -EINVAL); /* destroyed */

    /* The kernel's configuration counts its 8-byte in-object handle. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.page_size = 8192;
    cfg.kernel_handle_header = 1;
    cfg.class_grid = 1;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    CHECK_RC(zsmem_pool_max_object_size(pool), 8192);
    CHECK(zsmem_pool_placed_size(pool, 100) >= 108);
    CHECK_RC(zsmem_pool_placed_size(pool, 8192), 8192);
    zsmem_pool_destroy(pool);
    /* Log placement: the length rounded up to the lane's unit. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.placement = ZSMEM_PLACEMENT_LOG;
    cfg.log_lanes = 1;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    long long unit = zsmem_pool_placed_size(pool, 1);
    CHECK(unit >= 1 && (unit & (unit - 1)) == 0);
    CHECK_RC(zsmem_pool_placed_size(pool, (size_t)unit * 3), unit * 3);
    CHECK_RC(zsmem_pool_placed_size(pool, (size_t)unit * 3 + 1), unit * 4);
    zsmem_pool_destroy(pool);

    /* class_grid: a power of two in 1..=64. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.class_grid = 3;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    CHECK_MSG("zsmem_pool_new: invalid configuration: class_grid 3 is not a power of two");
    cfg.class_grid = 0;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    cfg.class_grid = 128;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), -EINVAL);
    cfg.class_grid = 64;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    /* A lone object of a sparse class goes to a coarser anchor: never less
       than its own class. */
    CHECK_RC(zsmem_pool_store(pool, data, 100, &h), 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &st, sizeof st), 0);
    CHECK(st.waste_rounding_bytes >= (uint64_t)zsmem_pool_placed_size(pool, 100) - 100);
    zsmem_pool_destroy(pool);
    /* The version before class_grid: the default, whatever follows. */
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.size = offsetof(zsmem_pool_config, class_grid);
    cfg.class_grid = 3; /* beyond the old struct: never read */
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    zsmem_pool_destroy(pool);
}

/* The appended zsmem_pool_stats fields: compaction's steps, lock hold and
 * committed pages, and deferred frees' batches; an older caller's struct
 * ends before them and is not written past. */
static void test_pool_stats_appended(void) {
    zsmem_pool_config cfg;
    zsmem_pool *pool = NULL;
    zsmem_pool_stats before, after;
    enum { N = 2000 };
    static uint64_t h[N];
    unsigned char obj[200];
    memset(obj, 9, sizeof obj);
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.compaction = ZSMEM_COMPACTION_OFF;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    for (int i = 0; i < N; i++) CHECK_RC(zsmem_pool_store(pool, obj, sizeof obj, &h[i]), 0);
    for (int i = 0; i < N; i++)
        if (i % 4 != 0) CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &before, sizeof before), 0);
    CHECK(before.compaction_steps == 0 && before.compaction_max_lock_hold_ns == 0);
    CHECK(before.pages_committed == 0 && before.deferred_batches == 0);
    int64_t freed = zsmem_pool_compact(pool);
    CHECK(freed > 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &after, sizeof after), 0);
    CHECK(after.compaction_steps > 0 && after.compaction_max_lock_hold_ns > 0);
    CHECK(after.pages_compacted == (uint64_t)freed);
    CHECK(after.deferred_batches == 0); /* frees at once */
    /* A caller whose struct ends at pending_free_bytes. */
    struct {
        uint64_t words[offsetof(zsmem_pool_stats, deferred_batches) / 8];
        uint64_t after[4];
    } old;
    memset(&old, 0xA5, sizeof old);
    CHECK_RC(zsmem_pool_get_stats(pool, (zsmem_pool_stats *)&old, sizeof old.words), 0);
    CHECK(old.words[0] == 4096 && old.words[4] == after.objects);
    CHECK(old.after[0] == 0xA5A5A5A5A5A5A5A5ull && old.after[3] == 0xA5A5A5A5A5A5A5A5ull);
    zsmem_pool_destroy(pool);

    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    cfg.free_mode = ZSMEM_FREE_DEFERRED;
    CHECK_RC(zsmem_pool_new(&cfg, &pool), 0);
    for (int i = 0; i < 64; i++) CHECK_RC(zsmem_pool_store(pool, obj, sizeof obj, &h[i]), 0);
    for (int i = 0; i < 64; i++) CHECK_RC(zsmem_pool_free(pool, h[i]), 0);
    CHECK_RC(zsmem_pool_flush(pool), 0);
    CHECK_RC(zsmem_pool_get_stats(pool, &after, sizeof after), 0);
    CHECK(after.objects == 0 && after.deferred_batches >= 1 && after.deferred_batches <= 64);
    zsmem_pool_destroy(pool);
}

/* The recompression and writeback reports, the writeback limit's getter,
 * idle_pages and check_invariants, with exact values where the pages make
 * them exact (noise pages: stored huge, no codec shrinks them). */
static void test_store_reports(void) {
    static unsigned char page[4096], out[4096];
    char dir[] = "/tmp/zsmem-c-report-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/backing", dir);
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_recompress_stat rs, total;
    zsmem_writeback_report wb;
    zsmem_bd_stat bd;
    uint64_t pages = 7;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK_RC(zsmem_store_config_default(&scfg), 0);
    scfg.slots = 64;
    scfg.recompress_codec = ZSMEM_CODEC_ZSTD;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);

    enum { TEXT = 24, NOISE = 8 };
    for (int i = 0; i < TEXT; i++) {
        source_page(page, sizeof page, i);
        CHECK_RC(zsmem_store_write(store, (size_t)i, page, sizeof page), 0);
    }
    for (int i = 0; i < NOISE; i++) {
        noise_page(page, sizeof page, (uint64_t)i + 1);
        CHECK_RC(zsmem_store_write(store, (size_t)(TEXT + i), page, sizeof page), 0);
    }
    memset(page, 0, sizeof page); /* same-filled: holds no object, never idle */
    CHECK_RC(zsmem_store_write(store, 40, page, sizeof page), 0);
    CHECK_RC(zsmem_store_check_invariants(store), 0);

    CHECK_RC(zsmem_store_idle_pages(store), 0);
    CHECK_RC(zsmem_store_mark_idle(store, 0), TEXT + NOISE);
    CHECK_RC(zsmem_store_idle_pages(store), TEXT + NOISE);
    CHECK_RC(zsmem_store_read(store, 0, out, sizeof out), 0); /* clears its mark */
    CHECK_RC(zsmem_store_idle_pages(store), TEXT + NOISE - 1);

    /* Huge (noise) pages: all examined, none shrinks, all marked. */
    memset(&rs, 0xff, sizeof rs);
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_HUGE, 0, &rs, sizeof rs), 0);
    CHECK(rs.examined == NOISE && rs.recompressed == 0 && rs.bytes_saved == 0);
    CHECK(rs.marked_incompressible == NOISE);
    /* Marked slots are not tried again. */
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_HUGE, 0, &rs, sizeof rs), 0);
    CHECK(rs.examined == 0 && rs.marked_incompressible == 0);
    /* The idle text pages: the return value is the report's count. */
    long long re = zsmem_store_recompress_report(store, ZSMEM_SELECT_IDLE, 0, &rs, sizeof rs);
    CHECK(re >= 0 && (uint64_t)re == rs.recompressed);
    CHECK(rs.examined == TEXT - 1); /* slot 0 was read: no longer idle */
    CHECK(rs.recompressed + rs.marked_incompressible <= rs.examined);
    CHECK((rs.recompressed == 0) == (rs.bytes_saved == 0));
    /* The store's sums: the three calls'. */
    CHECK_RC(zsmem_store_recompress_stat(store, &total, sizeof total), 0);
    CHECK(total.examined == NOISE + TEXT - 1 && total.recompressed == rs.recompressed);
    CHECK(total.bytes_saved == rs.bytes_saved);
    CHECK(total.marked_incompressible == NOISE + rs.marked_incompressible);
    /* A longer (newer) struct: the rest zeroed. */
    struct {
        zsmem_recompress_stat s;
        uint64_t more[2];
    } longer;
    memset(&longer, 0xff, sizeof longer);
    CHECK_RC(zsmem_store_recompress_stat(store, &longer.s, sizeof longer), 0);
    CHECK(longer.s.examined == total.examined && longer.more[0] == 0 && longer.more[1] == 0);
    /* Bad input: nothing is done. */
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_ALL, 0, NULL, sizeof rs), -EINVAL);
    CHECK_MSG("zsmem_store_recompress_report: out is NULL");
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_ALL, 0, &rs, 8), -EINVAL);
    CHECK_MSG("zsmem_store_recompress_report: out_size 8 is not that of any version");
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_ALL, 0, &rs, SIZE_MAX), -EINVAL);
    CHECK_RC(zsmem_store_recompress_report(store, 9, 0, &rs, sizeof rs), -EINVAL);
    CHECK_RC(zsmem_store_recompress_report(store, ZSMEM_SELECT_INCOMPRESSIBLE, 0, &rs, sizeof rs),
             -EINVAL);
    CHECK_RC(zsmem_store_recompress_report(NULL, ZSMEM_SELECT_ALL, 0, &rs, sizeof rs), -EINVAL);
    CHECK_RC(zsmem_store_recompress_report(FORGED_STORE, ZSMEM_SELECT_ALL, 0, &rs, sizeof rs),
             -EINVAL);
    CHECK_RC(zsmem_store_recompress_stat(store, &rs, 0), -EINVAL);
    CHECK_RC(zsmem_store_recompress_stat(store, NULL, sizeof rs), -EINVAL);
    CHECK_RC(zsmem_store_recompress_stat(FORGED_STORE, &rs, sizeof rs), -EINVAL);
    CHECK_RC(zsmem_store_recompress_stat(store, &rs, sizeof rs), 0);
    CHECK(memcmp(&rs, &total, sizeof rs) == 0);

    /* Writeback: no backing file yet. Every slot marked incompressible
       (the noise pages, and any text page zstd did not shrink a class) is
       written back below. */
    const long long inc = (long long)total.marked_incompressible;
    CHECK(inc >= NOISE);
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_ALL, 0, &wb, sizeof wb), -ENODEV);
    CHECK_RC(zsmem_store_set_backing_file(store, path), 0);
    CHECK_RC(zsmem_store_get_writeback_limit(store, &pages), 0); /* none */
    CHECK(pages == 0);
    CHECK_RC(zsmem_store_set_writeback_limit(store, 1, 5), 0);
    CHECK_RC(zsmem_store_get_writeback_limit(store, &pages), 1);
    CHECK(pages == 5);
    CHECK_RC(zsmem_store_get_writeback_limit(store, NULL), 1);
    /* The incompressible (noise) pages, stopped by the limit. */
    memset(&wb, 0xff, sizeof wb);
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_INCOMPRESSIBLE, 0, &wb, sizeof wb),
             5);
    CHECK(wb.written == 5 && wb.limit_reached == 1);
    CHECK_RC(zsmem_store_get_writeback_limit(store, &pages), 1);
    CHECK(pages == 0);
    CHECK_RC(zsmem_store_set_writeback_limit(store, 1, 100), 0);
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_INCOMPRESSIBLE, 2, &wb, sizeof wb),
             2);
    CHECK(wb.written == 2 && wb.limit_reached == 0); /* stopped by max_pages */
    CHECK_RC(zsmem_store_get_writeback_limit(store, &pages), 1);
    CHECK(pages == 98);
    CHECK_RC(zsmem_store_set_writeback_limit(store, 0, 0), 0);
    CHECK_RC(zsmem_store_get_writeback_limit(store, &pages), 0);
    CHECK(pages == 0);
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_INCOMPRESSIBLE, 0, &wb, sizeof wb),
             inc - 7);
    CHECK(wb.written == (uint64_t)inc - 7 && wb.limit_reached == 0);
    /* Bad input: nothing is written back. */
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_ALL, 0, NULL, sizeof wb), -EINVAL);
    CHECK_RC(zsmem_store_writeback_report(store, ZSMEM_SELECT_ALL, 0, &wb, sizeof wb - 8), -EINVAL);
    CHECK_RC(zsmem_store_writeback_report(store, 9, 0, &wb, sizeof wb), -EINVAL);
    CHECK_RC(zsmem_store_writeback_report(NULL, ZSMEM_SELECT_ALL, 0, &wb, sizeof wb), -EINVAL);
    CHECK_RC(zsmem_store_writeback_report(FORGED_STORE, ZSMEM_SELECT_ALL, 0, &wb, sizeof wb),
             -EINVAL);
    CHECK_RC(zsmem_store_bd_stat(store, &bd, sizeof bd), 0);
    CHECK(bd.bd_count == (uint64_t)inc && bd.bd_writes == (uint64_t)inc);
    CHECK_RC(zsmem_store_get_writeback_limit(NULL, &pages), -EINVAL);
    CHECK_RC(zsmem_store_get_writeback_limit(FORGED_STORE, &pages), -EINVAL);
    CHECK_MSG("zsmem_store_get_writeback_limit: store 0x7e57f00d0 is not a live store");
    CHECK_RC(zsmem_store_idle_pages(NULL), -EINVAL);
    CHECK_RC(zsmem_store_idle_pages(FORGED_STORE), -EINVAL);
    CHECK_RC(zsmem_store_check_invariants(NULL), -EINVAL);
    CHECK_RC(zsmem_store_check_invariants(FORGED_STORE), -EINVAL);
    /* Every page reads back, from memory or the backing file. */
    for (int i = 0; i < NOISE; i++) {
        noise_page(page, sizeof page, (uint64_t)i + 1);
        CHECK_RC(zsmem_store_read(store, (size_t)(TEXT + i), out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }
    for (int i = 0; i < TEXT; i++) {
        source_page(page, sizeof page, i);
        CHECK_RC(zsmem_store_read(store, (size_t)i, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }
    CHECK_RC(zsmem_store_check_invariants(store), 0);
    /* A pool's pointer is not a store's. */
    zsmem_pool *pool = new_pool(0);
    CHECK_RC(zsmem_store_idle_pages((zsmem_store *)pool), -EINVAL);
    CHECK_RC(zsmem_store_check_invariants((zsmem_store *)pool), -EINVAL);
    zsmem_pool_destroy(pool);
    zsmem_store_destroy(store);
    CHECK_RC(zsmem_store_check_invariants(store), -EINVAL); /* destroyed */
    CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

/* A zstd dictionary from bytes: a raw-content one (any bytes without
 * zstd's dictionary magic) shrinks pages like it; bytes that start as a
 * zstd dictionary and are not one are -EINVAL; 15 at most per store. */
static void test_store_set_dictionary(void) {
    static unsigned char dict[8192], page[4096], out[4096];
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_mm_stat before, after;
    enum { N = 16 };
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK_RC(zsmem_store_config_default(&scfg), 0);
    scfg.slots = N;
    scfg.codec = ZSMEM_CODEC_ZSTD;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    for (int i = 0; i < N; i++) {
        source_page(page, sizeof page, i + 500);
        CHECK_RC(zsmem_store_write(store, (size_t)i, page, sizeof page), 0);
    }
    CHECK_RC(zsmem_store_mm_stat(store, &before), 0);
    source_page(dict, 4096, 500);
    source_page(dict + 4096, 4096, 501);
    CHECK_RC(zsmem_store_set_dictionary(store, dict, sizeof dict), 0);
    for (int i = 0; i < N; i++) {
        source_page(page, sizeof page, i + 500);
        CHECK_RC(zsmem_store_write(store, (size_t)i, page, sizeof page), 0);
    }
    CHECK_RC(zsmem_store_mm_stat(store, &after), 0);
    CHECK(after.orig_data_size == before.orig_data_size);
    CHECK(after.compr_data_size < before.compr_data_size); /* the dictionary is used */
    for (int i = 0; i < N; i++) {
        source_page(page, sizeof page, i + 500);
        CHECK_RC(zsmem_store_read(store, (size_t)i, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }
    /* zstd's dictionary magic, then no dictionary. */
    unsigned char bad[256];
    memset(bad, 0x11, sizeof bad);
    bad[0] = 0x37, bad[1] = 0xA4, bad[2] = 0x30, bad[3] = 0xEC;
    CHECK_RC(zsmem_store_set_dictionary(store, bad, sizeof bad), -EINVAL);
    CHECK_MSG("zsmem_store_set_dictionary: invalid configuration: zstd cannot use these bytes");
    CHECK_RC(zsmem_store_set_dictionary(store, dict, 0), -EINVAL);
    CHECK_RC(zsmem_store_set_dictionary(store, NULL, 16), -EINVAL);
    CHECK_RC(zsmem_store_set_dictionary(NULL, dict, sizeof dict), -EINVAL);
    CHECK_RC(zsmem_store_set_dictionary(FORGED_STORE, dict, sizeof dict), -EINVAL);
    CHECK_RC(zsmem_store_check_invariants(store), 0);
    /* 15 dictionaries in all (one taken above), then the table is full. */
    int taken = 1;
    while (taken < 20 && zsmem_store_set_dictionary(store, dict, 4096 + (size_t)taken) == 0) taken++;
    CHECK(taken == 15);
    CHECK_RC(zsmem_store_set_dictionary(store, dict, sizeof dict), -EINVAL);
    CHECK_MSG("zsmem_store_set_dictionary: invalid configuration: the store's codec table is full");
    for (int i = 0; i < N; i++) {
        source_page(page, sizeof page, i + 500);
        CHECK_RC(zsmem_store_read(store, (size_t)i, out, sizeof out), 0);
        CHECK(memcmp(out, page, sizeof page) == 0);
    }
    zsmem_store_destroy(store);
}

/* track_access_time: on by default (as in Rust); off, marking by age is
 * refused and marking all works; 0 or 1, reserved 0; an older struct gets
 * the default. */
static void test_store_track_access_time(void) {
    static unsigned char page[4096];
    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    CHECK_RC(zsmem_pool_config_default(&cfg), 0);
    CHECK_RC(zsmem_store_config_default(&scfg), 0);
    CHECK(scfg.track_access_time == 1 && scfg.reserved == 0);
    scfg.slots = 8;
    text_page(page, sizeof page, 3);
    for (int track = 0; track < 2; track++) {
        scfg.track_access_time = (uint32_t)track;
        CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
        CHECK_RC(zsmem_store_write(store, 1, page, sizeof page), 0);
        CHECK_RC(zsmem_store_write(store, 2, page, sizeof page), 0);
        CHECK_RC(zsmem_store_mark_idle(store, 60), track ? 0 : -EINVAL);
        if (!track) CHECK_MSG("zsmem_store_mark_idle: invalid configuration: marking idle by age");
        CHECK_RC(zsmem_store_mark_idle(store, 0), 2);
        CHECK_RC(zsmem_store_idle_pages(store), 2);
        zsmem_store_destroy(store);
    }
    scfg.track_access_time = 2;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -EINVAL);
    CHECK_MSG("zsmem_store_new: invalid configuration: track_access_time is 2");
    scfg.track_access_time = 1;
    scfg.reserved = 1;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -EINVAL);
    /* The version before track_access_time: kept, whatever follows. */
    scfg.size = offsetof(zsmem_store_config, track_access_time);
    scfg.track_access_time = 0;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), 0);
    CHECK_RC(zsmem_store_write(store, 1, page, sizeof page), 0);
    CHECK_RC(zsmem_store_mark_idle(store, 60), 0);
    zsmem_store_destroy(store);
    /* A size between versions is no struct's. */
    scfg.size = offsetof(zsmem_store_config, track_access_time) + 4;
    CHECK_RC(zsmem_store_new(&scfg, &cfg, &store), -EINVAL);
}

struct test {
    const char *name;
    void (*run)(void);
};

int main(void) {
    const struct test tests[] = {
        {"version", test_version},
        {"pool_round_trip", test_pool_round_trip},
        {"compaction_keeps_handles", test_compaction_keeps_handles},
        {"null_arguments", test_null_arguments},
        {"handle_misuse", test_handle_misuse},
        {"cross_pool_handles", test_cross_pool_handles},
        {"lengths", test_lengths},
        {"memory_limit", test_memory_limit},
        {"bad_configurations", test_bad_configurations},
        {"store", test_store},
        {"store_memory", test_store_memory},
        {"store_memory_limit", test_store_memory_limit},
        {"huge_slot_counts", test_huge_slot_counts},
        {"log_slot_limit", test_log_slot_limit},
        {"use_after_destroy", test_use_after_destroy},
        {"destroy_while_in_use", test_destroy_while_in_use},
        {"errors_and_messages", test_errors_and_messages},
        {"deferred_free", test_deferred_free},
        {"older_struct_sizes", test_older_struct_sizes},
        {"page_return", test_page_return},
        {"store_idle_writeback", test_store_idle_writeback},
        {"pool_sizes", test_pool_sizes},
        {"pool_stats_appended", test_pool_stats_appended},
        {"store_reports", test_store_reports},
        {"store_set_dictionary", test_store_set_dictionary},
        {"store_track_access_time", test_store_track_access_time},
        {"threads", test_threads},
    };
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = check_failures;
        tests[i].run();
        int ok = check_failures == before;
        printf("test %s ... %s\n", tests[i].name, ok ? "ok" : "FAILED");
        fflush(stdout);
        if (ok)
            passed++;
        else
            failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
