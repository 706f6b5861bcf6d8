/* cotenant's C ABI end to end: the library's version, the CPU count and its JSON explanation,
 * an advisor polled a few times, 100 tasks on a pool, a pool with options whose full queue
 * refuses a task, its metrics as JSON, and the error path. Exits non-zero on any failure.
 * Built and run by crates/cotenant-ffi/test-c.sh (part of `make test`), and by
 * crates/cotenant-ffi/install-check.sh with `pkg-config --cflags --libs cotenant` from an
 * installed prefix (`make install-check`). */
#define _POSIX_C_SOURCE 200809L

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cotenant.h"

static int failures = 0;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, " (cotenant_last_error: \"%s\")\n", cotenant_last_error()); \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#define TASKS 100

/* A pool task: must not unwind (no longjmp, no C++ exception) out of the call. */
static void increment(void *arg) {
    atomic_fetch_add_explicit((atomic_uint *)arg, 1, memory_order_relaxed);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A task that holds its worker until released, so that the queue behind it stays as filled:
 * what follows depends on no timing. */
struct gate {
    atomic_int started;
    atomic_int released;
};

static void hold(void *arg) {
    struct gate *gate = arg;
    atomic_store(&gate->started, 1);
    while (!atomic_load(&gate->released)) {
        sleep_ms(1);
    }
}

/* Waits until `hold` runs on the pool's one worker, i.e. has left the queue. */
static void wait_started(struct gate *gate) {
    while (!atomic_load(&gate->started)) {
        sleep_ms(1);
    }
}

int main(void) {
    /* The library loaded is the one this program was compiled for. */
    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", COTENANT_VERSION_MAJOR, COTENANT_VERSION_MINOR,
             COTENANT_VERSION_PATCH);
    const char *version = cotenant_version();
    CHECK(version != NULL && strcmp(version, expected) == 0, "cotenant_version() \"%s\", header %s",
          version != NULL ? version : "(null)", expected);
    printf("version: %s\n", version != NULL ? version : "(null)");

    /* The count and its explanation. */
    uint32_t count = 0;
    int rc = cotenant_cpu_count(&count);
    CHECK(rc == COTENANT_OK, "cotenant_cpu_count returned %d", rc);
    CHECK(count >= 1, "count %u", count);
    printf("threads: %u\n", count);

    char *json = cotenant_cpus_json();
    CHECK(json != NULL, "cotenant_cpus_json returned NULL");
    if (json != NULL) {
        CHECK(strstr(json, "\"threads\":") != NULL && strstr(json, "\"sources\":") != NULL, "json: %s", json);
        printf("json: %s\n", json);
        cotenant_string_free(json);
    }

    /* An advisor, as a runtime's scheduler would poll it: once per 10 ms period. */
    cotenant_advisor *advisor = cotenant_advisor_new(4, 10000);
    CHECK(advisor != NULL, "cotenant_advisor_new returned NULL");
    if (advisor != NULL) {
        for (int i = 0; i < 5; i++) {
            sleep_ms(11);
            uint32_t active = 0;
            rc = cotenant_advisor_poll(advisor, i == 0 ? -1 : i, &active);
            CHECK(rc == COTENANT_OK, "cotenant_advisor_poll returned %d", rc);
            CHECK(active >= 1 && active <= 4, "active %u", active);
            printf("advisor poll %d: %u active threads\n", i, active);
        }
        rc = cotenant_advisor_poll(advisor, -2, &(uint32_t){0});
        CHECK(rc == COTENANT_ERR_INVALID && strstr(cotenant_last_error(), "queued") != NULL, "rc %d", rc);
        cotenant_advisor_free(advisor);
    }

    /* A pool: 100 tasks, then a graceful shutdown that runs them all. */
    static atomic_uint counter;
    atomic_init(&counter, 0);
    cotenant_pool *pool = cotenant_pool_new(0);
    CHECK(pool != NULL, "cotenant_pool_new returned NULL");
    if (pool != NULL) {
        for (int i = 0; i < TASKS; i++) {
            rc = cotenant_pool_submit(pool, increment, &counter);
            CHECK(rc == COTENANT_OK, "cotenant_pool_submit returned %d", rc);
        }
        rc = cotenant_pool_shutdown(pool);
        CHECK(rc == COTENANT_OK, "cotenant_pool_shutdown returned %d", rc);
        unsigned total = atomic_load(&counter);
        CHECK(total == TASKS, "%u of %d tasks ran", total, TASKS);
        printf("pool: %u of %d tasks ran\n", total, TASKS);
    }

    /* A pool with options: one worker, a queue of one task, and a full queue refuses. */
    static struct gate gate;
    atomic_init(&gate.started, 0);
    atomic_init(&gate.released, 0);
    atomic_store(&counter, 0);
    cotenant_pool_options options = {.threads = 1, .queue_capacity = 1, .on_full = COTENANT_ON_FULL_REJECT,
                                     .period_us = 0, .task_histograms = COTENANT_HISTOGRAMS_ON};
    pool = cotenant_pool_new_with(&options);
    CHECK(pool != NULL, "cotenant_pool_new_with returned NULL");
    if (pool != NULL) {
        rc = cotenant_pool_try_submit(pool, hold, &gate);
        CHECK(rc == COTENANT_OK, "cotenant_pool_try_submit (hold) returned %d", rc);
        wait_started(&gate); /* the worker holds `hold`: the queue is empty */
        rc = cotenant_pool_try_submit(pool, increment, &counter);
        CHECK(rc == COTENANT_OK, "cotenant_pool_try_submit into the empty queue returned %d", rc);
        rc = cotenant_pool_try_submit(pool, increment, &counter);
        CHECK(rc == COTENANT_ERR_FULL && strstr(cotenant_last_error(), "full") != NULL,
              "cotenant_pool_try_submit into the full queue returned %d", rc);
        rc = cotenant_pool_submit(pool, increment, &counter); /* on_full: reject */
        CHECK(rc == COTENANT_ERR_FULL, "cotenant_pool_submit into the full queue returned %d", rc);

        /* The metrics, sized first: the length without the NUL, nothing written. */
        int needed = cotenant_pool_metrics_json(pool, NULL, 0);
        CHECK(needed > 0, "cotenant_pool_metrics_json(pool, NULL, 0) returned %d", needed);
        char small[8] = "unset";
        int length = cotenant_pool_metrics_json(pool, small, sizeof small);
        CHECK(length >= (int)sizeof small && small[0] == '\0', "a short buffer: %d, \"%s\"", length, small);
        char metrics[4096];
        length = cotenant_pool_metrics_json(pool, metrics, sizeof metrics);
        CHECK(length > 0 && length < (int)sizeof metrics && (size_t)length == strlen(metrics),
              "cotenant_pool_metrics_json returned %d", length);
        if (length > 0 && length < (int)sizeof metrics) {
            printf("metrics: %s\n", metrics);
            CHECK(strstr(metrics, "\"threads\":1") != NULL && strstr(metrics, "\"queue_capacity\":1") != NULL &&
                      strstr(metrics, "\"queued\":1") != NULL && strstr(metrics, "\"rejected\":2") != NULL &&
                      strstr(metrics, "\"completed\":0") != NULL,
                  "metrics: %s", metrics);
            /* Timed tasks (COTENANT_HISTOGRAMS_ON): the held task's queue wait is recorded. */
            CHECK(strstr(metrics, "\"queue_wait\":{") != NULL && strstr(metrics, "\"run_time\":{") != NULL,
                  "no histograms in: %s", metrics);
        }

        atomic_store(&gate.released, 1);
        rc = cotenant_pool_shutdown(pool);
        CHECK(rc == COTENANT_OK, "cotenant_pool_shutdown returned %d", rc);
        unsigned ran = atomic_load(&counter);
        CHECK(ran == 1, "%u tasks ran: the queued one should have, the two refused should not", ran);
        printf("pool with options: 1 task queued ran, 2 refused did not\n");
    }
    cotenant_pool_options bad = {.threads = 0, .queue_capacity = 0, .on_full = 7, .period_us = 0};
    CHECK(cotenant_pool_new_with(&bad) == NULL && strstr(cotenant_last_error(), "options.on_full") != NULL,
          "on_full 7 was accepted");
    cotenant_pool_options bad_histograms = {.task_histograms = 3};
    CHECK(cotenant_pool_new_with(&bad_histograms) == NULL &&
              strstr(cotenant_last_error(), "options.task_histograms") != NULL,
          "task_histograms 3 was accepted");

    /* The error path: a NULL argument is a code and a message naming it. */
    rc = cotenant_cpu_count(NULL);
    CHECK(rc == COTENANT_ERR_NULL, "cotenant_cpu_count(NULL) returned %d", rc);
    CHECK(strcmp(cotenant_last_error(), "cotenant_cpu_count: out is NULL") == 0, "message");
    rc = cotenant_pool_submit(NULL, increment, &counter);
    CHECK(rc == COTENANT_ERR_NULL && strstr(cotenant_last_error(), "pool is NULL") != NULL, "rc %d", rc);
    CHECK(cotenant_advisor_new(4, 1) == NULL && strstr(cotenant_last_error(), "period_us") != NULL,
          "a 1 us period was accepted");
    printf("errors: %s\n", cotenant_last_error());

    if (failures != 0) {
        fprintf(stderr, "example: %d check(s) failed\n", failures);
        return 1;
    }
    printf("example: every check passed\n");
    return 0;
}
