/* Tests of zsmem_region_* from C: a region filled and read back by two
 * threads with every byte checked while units are evicted and brought
 * back, the statistics, set_budget and get_budget, reclaim,
 * check_invariants, a page the program dropped, and the error paths
 * (NULL, a bad unit, a forged or destroyed region).
 *
 * Prints one line per test and "N passed, N failed"; exits 0 only if every
 * test passed. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
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
    /* The appended counters: time spent on the units compressed and
       brought back. */
    CHECK(s.compressions > 0 && s.compress_ns > 0 && s.decompress_ns > 0);
    CHECK(s.sync_evictions <= s.evictions && s.dropped_by_program == 0);
    CHECK(zsmem_region_check_invariants(r) == 0);
    size_t budget = 0;
    CHECK(zsmem_region_get_budget(r, &budget) == 0 && budget == 1 << 20);
    CHECK(zsmem_region_set_budget(r, 256 << 10) == 0);
    CHECK(zsmem_region_get_budget(r, &budget) == 0 && budget == 256 << 10);
    CHECK(zsmem_region_set_budget(r, (256 << 10) + 100) == 0); /* whole units */
    CHECK(zsmem_region_get_budget(r, &budget) == 0 && budget == 256 << 10);
    CHECK(zsmem_region_set_budget(r, 0) == -EINVAL);
    CHECK(zsmem_region_get_budget(r, &budget) == 0 && budget == 256 << 10);
    CHECK(zsmem_region_get_budget(r, NULL) == -EINVAL);
    /* A budget beyond any int64_t comes back whole (review s28: it was
       clamped to INT64_MAX), rounded down to whole units. */
    CHECK(zsmem_region_set_budget(r, SIZE_MAX) == 0);
    CHECK(zsmem_region_get_budget(r, &budget) == 0 && budget > (size_t)INT64_MAX &&
          budget % cfg.unit == 0);
    CHECK(zsmem_region_set_budget(r, 256 << 10) == 0);
    /* Push everything out now: no thread touches the region, so resident
       memory only falls meanwhile (the evictor thread may evict too). */
    struct zsmem_region_stats before, after;
    CHECK(zsmem_region_get_stats(r, &before, sizeof before) == 0);
    int64_t evicted = zsmem_region_reclaim(r, 0);
    CHECK(evicted > 0 || before.resident_bytes == 0);
    CHECK(zsmem_region_get_stats(r, &after, sizeof after) == 0);
    CHECK(after.resident_bytes + (uint64_t)evicted * 16384 <= before.resident_bytes);
    CHECK(after.evictions >= before.evictions + (uint64_t)evicted);
    CHECK(zsmem_region_check_invariants(r) == 0);
    for (size_t i = 0; i < n; i++)
        if (w[i] != word(i, 2)) {
            CHECK(w[i] == word(i, 2));
            break;
        }
    CHECK(zsmem_region_check_invariants(r) == 0);
    zsmem_region_destroy(r);
    CHECK(zsmem_region_len(r) == 0); /* destroyed: looked up, not used */
    return 0;
}

static int test_round_trip(void) { return round_trip(SIZE_MAX, ZSMEM_FAULTS_SIGNAL); }

static int test_round_trip_without_copies(void) { return round_trip(0, ZSMEM_FAULTS_SIGNAL); }

static int test_round_trip_fault_thread(void) { return round_trip(SIZE_MAX, ZSMEM_FAULTS_THREAD); }

/* A region of 1 MiB in units of 16 KiB with `budget` bytes resident at
   most, its memory at *p; NULL (with the reason printed) if it cannot be
   made. */
static struct zsmem_region *small_region(size_t budget, void **p) {
    struct zsmem_region_config cfg;
    CHECK(zsmem_region_config_default(&cfg) == 0);
    cfg.bytes = 1 << 20;
    cfg.budget = budget;
    cfg.unit = 16384;
    struct zsmem_region *r = NULL;
    if (zsmem_region_new(&cfg, &r) != 0) {
        fprintf(stderr, "  zsmem_region_new: %s\n", zsmem_last_error_message());
        return NULL;
    }
    CHECK(zsmem_region_ptr(r, p, NULL) == 0);
    return r;
}

/* A page the program drops (madvise) in a resident unit reads as zeros
 * and is counted; reclaim with a target keeps that many bytes; a caller's
 * older zsmem_region_stats (ending at readahead) is not written past. */
static int test_dropped_page_and_older_stats(void) {
    /* A budget beyond the region less headroom: nothing is evicted by
       itself. */
    void *p = NULL;
    struct zsmem_region *r = small_region(2 << 20, &p);
    if (r == NULL) return 1;
    uint64_t *w = p;
    for (size_t i = 0; i < 2048; i++) w[i] = word(i, 1); /* unit 0 */
    CHECK(madvise((char *)p + 4096, 4096, MADV_DONTNEED) == 0);
    CHECK(w[512] == 0 && w[0] == word(0, 1) && w[2047] == word(2047, 1));
    struct zsmem_region_stats s;
    CHECK(zsmem_region_get_stats(r, &s, sizeof s) == 0);
    CHECK(s.dropped_by_program == 1);
    CHECK(zsmem_region_check_invariants(r) == 0);
    /* Every unit resident, then down to two units' bytes. */
    for (size_t i = 2048; i < (1 << 20) / 8; i++) w[i] = word(i, 1);
    CHECK(zsmem_region_get_stats(r, &s, sizeof s) == 0);
    CHECK(s.resident_bytes == 1 << 20);
    CHECK(zsmem_region_reclaim(r, 2 * 16384 + 100) == 64 - 2);
    CHECK(zsmem_region_get_stats(r, &s, sizeof s) == 0);
    CHECK(s.resident_bytes == 2 * 16384 && s.compressions > 0);
    /* Nothing came back yet: compression time, no decompression time
       (tells the two apart, review s28). */
    CHECK(s.compress_ns > 0 && s.decompress_ns == 0);
    CHECK(zsmem_region_check_invariants(r) == 0);
    int same = w[512] == 0;
    for (size_t i = 2048; i < (1 << 20) / 8; i++) same &= w[i] == word(i, 1);
    CHECK(same);
    struct {
        unsigned char stats[offsetof(struct zsmem_region_stats, compress_ns)];
        unsigned char after[40];
    } old;
    memset(&old, 0xA5, sizeof old);
    CHECK(zsmem_region_get_stats(r, (struct zsmem_region_stats *)&old, sizeof old.stats) == 0);
    int untouched = 1;
    for (size_t i = 0; i < sizeof old.after; i++) untouched &= old.after[i] == 0xA5;
    CHECK(untouched);
    CHECK(((struct zsmem_region_stats *)&old)->bytes == 1 << 20);
    zsmem_region_destroy(r);
    CHECK(zsmem_region_reclaim(r, 0) == -EINVAL); /* destroyed */
    size_t budget = 0;
    CHECK(zsmem_region_get_budget(r, &budget) == -EINVAL);
    CHECK(zsmem_region_check_invariants(r) == -EINVAL);
    return 0;
}

/* A budget of one unit, written through by one thread: each new unit's
   fault evicts the last on the faulting thread (sync_evictions), and no
   writer races an eviction of its own unit (tells the counters apart,
   review s28). */
static int test_one_unit_budget(void) {
    void *p = NULL;
    struct zsmem_region *r = small_region(16384, &p);
    if (r == NULL) return 1;
    for (size_t u = 0; u < 64; u++) memset((char *)p + u * 16384, (int)u + 1, 16384);
    struct zsmem_region_stats s;
    CHECK(zsmem_region_get_stats(r, &s, sizeof s) == 0);
    CHECK(s.sync_evictions > 0 && s.eviction_races < s.sync_evictions);
    CHECK(s.sync_evictions <= s.evictions);
    int same = 1;
    for (size_t u = 0; u < 64; u++) same &= ((unsigned char *)p)[u * 16384 + 77] == u + 1;
    CHECK(same);
    CHECK(zsmem_region_check_invariants(r) == 0);
    zsmem_region_destroy(r);
    return 0;
}

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
    CHECK(zsmem_region_reclaim(NULL, 0) == -EINVAL);
    size_t budget;
    CHECK(zsmem_region_get_budget(NULL, &budget) == -EINVAL);
    CHECK(zsmem_region_check_invariants(NULL) == -EINVAL);
    /* A pointer no zsmem_region_new returned: looked up, never used. */
    struct zsmem_region *forged = (struct zsmem_region *)(uintptr_t)0x7e57f00d0;
    CHECK(zsmem_region_reclaim(forged, 0) == -EINVAL);
    CHECK(strstr(zsmem_last_error_message(), "is not a live region") != NULL);
    CHECK(zsmem_region_get_budget(forged, &budget) == -EINVAL);
    CHECK(zsmem_region_check_invariants(forged) == -EINVAL);
    CHECK(zsmem_region_get_stats(forged, &s, sizeof s) == -EINVAL);
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
                 {"region_dropped_page_and_older_stats", test_dropped_page_and_older_stats},
                 {"region_one_unit_budget", test_one_unit_budget},
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
