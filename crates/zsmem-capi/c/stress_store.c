/* A multi-threaded stress of the zsmem C API's page store: writer threads
 * write, read and discard their own slots while a maintenance thread
 * compacts, marks idle, recompresses (zstd as the secondary codec) and
 * writes back to a backing file, all at once; every read is checked byte
 * for byte against what the slot must hold, and every slot once more at
 * the end.
 *
 * Bounded by operation counts, not time: ZSMEM_STRESS_OPS operations per
 * writer thread (default 20000), ZSMEM_STRESS_THREADS writers (default 4),
 * and the maintenance thread does one action per 16 writer operations of
 * one thread. Prints what it did and exits 0 only if nothing was wrong.
 * run-tests.sh runs it (fewer operations under valgrind). */
/* mkdtemp and rmdir are POSIX.1-2008; the rest is C11. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zsmem.h"

enum { PAGE = 4096, SLOTS_PER_THREAD = 96, MAX_THREADS = 16 };

static atomic_long failures;

/* What a slot holds: zeros unless `written` (never written, or discarded
 * since), else page_for(slot, gen). Generations only grow, so a rewrite
 * after a discard stores a page unlike the one before. */
struct slot {
    uint32_t gen;
    int written;
};

struct writer {
    zsmem_store *store;
    int first;     /* its slots: first .. first + SLOTS_PER_THREAD */
    uint64_t seed;
    long ops;
    long writes, reads, discards;
    struct slot slots[SLOTS_PER_THREAD];
};

static void fail(const char *what, int slot, long long rc) {
    fprintf(stderr, "  %s, slot %d: %lld (%s); last error: %s\n", what, slot, rc,
            zsmem_strerror((int)rc), zsmem_last_error_message());
    atomic_fetch_add(&failures, 1);
}

static uint64_t next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The page slot `slot` holds at generation `gen` (> 0): by turns text,
 * same-filled, noise (huge) and half noise half zeros, so every size
 * class path, same-filled slots and huge objects meet compaction,
 * recompression and writeback. */
static void page_for(unsigned char *p, int slot, uint32_t gen) {
    uint64_t x = ((uint64_t)slot << 32 | gen) * 0x9E3779B97F4A7C15ull | 1;
    switch ((slot + gen) % 4) {
    case 0: {
        size_t at = 0;
        for (int i = 0; at < PAGE; i++) {
            char line[80];
            int n = snprintf(line, sizeof line, "int s%d_g%u_%d(int x) { return x + %d; }\n", slot,
                             gen, i, (int)(next(&x) % 1000));
            for (int j = 0; j < n && at < PAGE; j++) p[at++] = (unsigned char)line[j];
        }
        break;
    }
    case 1:
        memset(p, (int)(1 + gen % 255), PAGE);
        break;
    case 2:
        for (size_t i = 0; i < PAGE; i++) p[i] = (unsigned char)(next(&x) >> 24);
        break;
    default:
        for (size_t i = 0; i < PAGE / 2; i++) p[i] = (unsigned char)(next(&x) >> 24);
        memset(p + PAGE / 2, 0, PAGE / 2);
        break;
    }
}

static void check_slot(zsmem_store *store, int slot, uint32_t gen, unsigned char *buf,
                       unsigned char *want) {
    int rc = zsmem_store_read(store, (size_t)slot, buf, PAGE);
    if (rc != 0) {
        fail("read", slot, rc);
        return;
    }
    if (gen == 0)
        memset(want, 0, PAGE);
    else
        page_for(want, slot, gen);
    if (memcmp(buf, want, PAGE) != 0) {
        size_t i = 0;
        while (buf[i] == want[i]) i++;
        fprintf(stderr, "  slot %d generation %u: byte %zu is %u, want %u\n", slot, gen, i,
                buf[i], want[i]);
        atomic_fetch_add(&failures, 1);
    }
}

static void *writer_main(void *arg) {
    struct writer *w = arg;
    unsigned char *buf = malloc(PAGE), *want = malloc(PAGE);
    uint64_t x = w->seed | 1;
    for (long i = 0; i < w->ops; i++) {
        uint64_t r = next(&x);
        int k = (int)(r % SLOTS_PER_THREAD), slot = w->first + k;
        struct slot *s = &w->slots[k];
        switch ((r >> 32) % 8) {
        case 0:
        case 1:
        case 2: {
            page_for(want, slot, s->gen + 1);
            int rc = zsmem_store_write(w->store, (size_t)slot, want, PAGE);
            if (rc != 0) {
                fail("write", slot, rc);
            } else {
                s->gen++;
                s->written = 1;
            }
            w->writes++;
            break;
        }
        case 3: {
            /* A run of this thread's slots, as a filesystem's discard. */
            int count = 1 + (int)((r >> 40) % 4);
            if (k + count > SLOTS_PER_THREAD) count = SLOTS_PER_THREAD - k;
            int rc = zsmem_store_discard(w->store, (size_t)slot, (size_t)count);
            if (rc != 0) fail("discard", slot, rc);
            for (int j = 0; j < count; j++) w->slots[k + j].written = 0;
            w->discards++;
            break;
        }
        default:
            check_slot(w->store, slot, s->written ? s->gen : 0, buf, want);
            w->reads++;
            break;
        }
    }
    free(buf);
    free(want);
    return NULL;
}

struct maintenance {
    zsmem_store *store;
    long rounds;
    long compactions, idle_marked, recompressed, written_back, stats;
};

static void *maintenance_main(void *arg) {
    struct maintenance *m = arg;
    for (long i = 0; i < m->rounds; i++) {
        long long rc;
        switch (i % 5) {
        case 0:
            rc = zsmem_store_compact(m->store);
            if (rc < 0) fail("compact", -1, rc);
            m->compactions++;
            break;
        case 1:
            rc = zsmem_store_mark_idle(m->store, 0);
            if (rc < 0) fail("mark_idle", -1, rc);
            else m->idle_marked += rc;
            break;
        case 2:
            rc = zsmem_store_recompress(m->store, i % 2 ? ZSMEM_SELECT_IDLE : ZSMEM_SELECT_ALL, 0);
            if (rc < 0) fail("recompress", -1, rc);
            else m->recompressed += rc;
            break;
        case 3:
            rc = zsmem_store_writeback(m->store, i % 2 ? ZSMEM_SELECT_IDLE : ZSMEM_SELECT_HUGE, 8);
            if (rc < 0) fail("writeback", -1, rc);
            else m->written_back += rc;
            break;
        default: {
            zsmem_mm_stat st;
            rc = zsmem_store_mm_stat(m->store, &st);
            if (rc != 0) fail("mm_stat", -1, rc);
            m->stats++;
            break;
        }
        }
    }
    return NULL;
}

static long env_long(const char *name, long dflt, long min, long max) {
    const char *v = getenv(name);
    if (!v) return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min || n > max) {
        fprintf(stderr, "%s=%s: want a number from %ld to %ld\n", name, v, min, max);
        exit(2);
    }
    return n;
}

int main(void) {
    long ops = env_long("ZSMEM_STRESS_OPS", 20000, 1, 100000000);
    int threads = (int)env_long("ZSMEM_STRESS_THREADS", 4, 1, MAX_THREADS);
    char dir[] = "/tmp/zsmem-c-stress-XXXXXX", path[64];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof path, "%s/backing", dir);

    zsmem_pool_config cfg;
    zsmem_store_config scfg;
    zsmem_store *store = NULL;
    zsmem_pool_config_default(&cfg);
    zsmem_store_config_default(&scfg);
    scfg.slots = (size_t)threads * SLOTS_PER_THREAD;
    scfg.recompress_codec = ZSMEM_CODEC_ZSTD;
    int rc = zsmem_store_new(&scfg, &cfg, &store);
    if (rc != 0) fail("store_new", -1, rc);
    rc = zsmem_store_set_backing_file(store, path);
    if (rc != 0) fail("set_backing_file", -1, rc);

    static struct writer w[MAX_THREADS];
    pthread_t t[MAX_THREADS], mt;
    struct maintenance m = {store, ops / 16, 0, 0, 0, 0, 0};
    for (int i = 0; i < threads; i++) {
        w[i] = (struct writer){.store = store,
                               .first = i * SLOTS_PER_THREAD,
                               .seed = 0x2545F4914F6CDD1Dull * (uint64_t)(i + 1),
                               .ops = ops};
        if (pthread_create(&t[i], NULL, writer_main, &w[i]) != 0) fail("pthread_create", i, 0);
    }
    if (pthread_create(&mt, NULL, maintenance_main, &m) != 0) fail("pthread_create", -1, 0);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    pthread_join(mt, NULL);

    /* Every slot once more, after everything. */
    unsigned char *buf = malloc(PAGE), *want = malloc(PAGE);
    long writes = 0, reads = 0, discards = 0;
    for (int i = 0; i < threads; i++) {
        for (int k = 0; k < SLOTS_PER_THREAD; k++) {
            const struct slot *s = &w[i].slots[k];
            check_slot(store, w[i].first + k, s->written ? s->gen : 0, buf, want);
        }
        writes += w[i].writes;
        reads += w[i].reads;
        discards += w[i].discards;
    }
    free(buf);
    free(want);
    zsmem_bd_stat bd;
    memset(&bd, 0, sizeof bd);
    rc = zsmem_store_bd_stat(store, &bd, sizeof bd);
    if (rc != 0) fail("bd_stat", -1, rc);
    zsmem_store_destroy(store);
    unlink(path);
    rmdir(dir);

    long bad = atomic_load(&failures);
    printf("stress_store: %d writers x %ld operations: %ld writes, %ld reads checked, %ld discards; "
           "maintenance: %ld compactions, %ld slots marked idle, %ld recompressed, %ld written "
           "back (%" PRIu64 " read back from the backing file); %ld wrong\n",
           threads, ops, writes, reads, discards, m.compactions, m.idle_marked, m.recompressed,
           m.written_back, bd.bd_reads, bad);
    return bad == 0 ? 0 : 1;
}
