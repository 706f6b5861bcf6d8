/* cotenant's C ABI end to end: the CPU count and its JSON explanation, an advisor polled a
 * few times, 100 tasks on a pool, and the error path. Exits non-zero on any failure.
 * Built and run by crates/cotenant-ffi/test-c.sh (part of `make test`). */
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

int main(void) {
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
