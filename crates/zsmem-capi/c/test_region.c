/* Tests of zsmem_region_* from C: a region filled and read back by two
 * threads with every byte checked while units are evicted and brought
 * back, the statistics, set_budget, and the error paths (NULL, a bad unit,
 * a destroyed region).
 *
 * Prints one line per test and "N passed, N failed"; exits 0 only if every
 * test passed. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "zsmem.h"

static int failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "  %s:%d: check failed: %s\n  last error: %s\n", __FILE__, \
                    __LINE__, #cond, zsmem_last_error_message());                     \
            failures++;                                                                \
        }                                                                              \
    } while (0)

static uint64_t word(size_t i, uint64_t round) {
    uint64_t x = ((uint64_t)i / 64) * 0x9E3779B97F4A7C15ull + round;
    return x >> 40; /* compressible: runs of 64 equal words */
}

struct half {
    uint64_t *words;
    size_t from, to;
    int bad;
};

static void *fill_and_check(void *arg) {
    struct half *h = arg;
    for (uint64_t round = 1; round <= 2; round++) {
        for (size_t i = h->from; i < h->to; i++) h->words[i] = word(i, round);
        for (size_t i = h->from; i < h->to; i++)
            if (h->words[i] != word(i, round)) h->bad++;
    }
    return NULL;
}

/* keep_copies: SIZE_MAX (the default) keeps every copy of a resident unit,
   0 none; faults: ZSMEM_FAULTS_SIGNAL (the default) or ZSMEM_FAULTS_THREAD. */
static int round_trip(size_t keep_copies, uint32_t faults) {
    struct zsmem_region_config cfg;
    CHECK(zsmem_region_config_default(&cfg) == 0);
    CHECK(cfg.keep_copies == SIZE_MAX && cfg.readahead == 16384);
    CHECK(cfg.faults == ZSMEM_FAULTS_SIGNAL && cfg.reserved == 0);
    cfg.keep_copies = keep_copies;
    cfg.faults = faults;
    cfg.bytes = 8 << 20;
    cfg.budget = 1 << 20;
    cfg.unit = 16384;
    struct zsmem_region *r = NULL;
    int rc = zsmem_region_new(&cfg, &r);
    if (rc != 0) {
        fprintf(stderr, "  zsmem_region_new: %s\n", zsmem_last_error_message());
        return 1;
    }
    void *p = NULL;
    size_t len = 0;
    CHECK(zsmem_region_ptr(r, &p, &len) == 0);
    CHECK(len == (size_t)8 << 20 && zsmem_region_len(r) == len && p != NULL);
    uint64_t *w = p;
    size_t n = len / 8;
    struct half halves[2] = {{w, 0, n / 2, 0}, {w, n / 2, n, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fill_and_check, &halves[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(halves[0].bad == 0 && halves[1].bad == 0);
    struct zsmem_region_stats s;
    CHECK(zsmem_region_get_stats(r, &s, sizeof s) == 0);
    CHECK(s.resident_bytes <= s.budget && s.budget == 1 << 20);
    CHECK(s.evictions > 0 && s.promotions > 0 && s.stored_bytes > 0 && s.errors == 0);
    CHECK(s.fault_p50_ns > 0 && s.fault_p50_ns <= s.fault_p99_ns);
    if (keep_copies == 0) CHECK(s.copy_bytes == 0 && s.copies_dropped > 0);
    else CHECK(s.copies_dropped == 0);
    CHECK(zsmem_region_set_budget(r, 256 << 10) == 0);
    CHECK(zsmem_region_set_budget(r, 0) == -EINVAL);
    for (size_t i = 0; i < n; i++)
        if (w[i] != word(i, 2)) {
            CHECK(w[i] == word(i, 2));
            break;
        }
    zsmem_region_destroy(r);
    CHECK(zsmem_region_len(r) == 0); /* destroyed: looked up, not used */
    return 0;
}

static int test_round_trip(void) { return round_trip(SIZE_MAX, ZSMEM_FAULTS_SIGNAL); }

static int test_round_trip_without_copies(void) { return round_trip(0, ZSMEM_FAULTS_SIGNAL); }

static int test_round_trip_fault_thread(void) { return round_trip(SIZE_MAX, ZSMEM_FAULTS_THREAD); }

static int test_errors(void) {
    struct zsmem_region_config cfg;
    struct zsmem_region *r = NULL;
    CHECK(zsmem_region_new(NULL, &r) == -EINVAL);
    CHECK(zsmem_region_config_default(&cfg) == 0);
    CHECK(zsmem_region_new(&cfg, NULL) == -EINVAL);
    cfg.unit = 3000;
    CHECK(zsmem_region_new(&cfg, &r) == -EINVAL);
    CHECK(strstr(zsmem_last_error_message(), "unit") != NULL);
    CHECK(zsmem_region_config_default(&cfg) == 0);
    cfg.budget = 10;
    CHECK(zsmem_region_new(&cfg, &r) == -EINVAL);
    CHECK(zsmem_region_config_default(&cfg) == 0);
    cfg.faults = 7;
    CHECK(zsmem_region_new(&cfg, &r) == -EINVAL);
    CHECK(strstr(zsmem_last_error_message(), "ZSMEM_FAULTS_SIGNAL") != NULL);
    CHECK(zsmem_region_config_default(&cfg) == 0);
    cfg.reserved = 1;
    CHECK(zsmem_region_new(&cfg, &r) == -EINVAL);
    CHECK(zsmem_region_ptr(NULL, NULL, NULL) == -EINVAL);
    struct zsmem_region_stats s;
    CHECK(zsmem_region_get_stats(NULL, &s, sizeof s) == -EINVAL);
    zsmem_region_destroy(NULL);
    return 0;
}

int main(void) {
    struct {
        const char *name;
        int (*run)(void);
    } tests[] = {{"region_round_trip", test_round_trip},
                 {"region_round_trip_without_copies", test_round_trip_without_copies},
                 {"region_round_trip_fault_thread", test_round_trip_fault_thread},
                 {"region_errors", test_errors}};
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = failures;
        int rc = tests[i].run();
        int ok = rc == 0 && failures == before;
        printf("%s %s\n", ok ? "ok  " : "FAIL", tests[i].name);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
