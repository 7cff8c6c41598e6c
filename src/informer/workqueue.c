/* wq: one item per key holds all of that key's state (queued, in flight, waiting on a timer,
 * failure count) and lives only while some of it is set. Queued items form a FIFO; a timer with
 * delay 0 hands them out, so adding a key from any callback never re-enters a processor. */
#include "informer/workqueue.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/backoff.h"
#include "util/rng.h"
#include "util/strmap.h"

typedef struct wq_item {
    strmap_node node;
    wq *q;
    struct wq_item *next; /* in the FIFO */
    bool dirty;           /* queued: will be handed out (again, if in flight now) */
    bool processing;
    unsigned failures;
    uint64_t queued_at; /* when it last became dirty */
    uint64_t timer;     /* pending wq_add_after, 0 if none */
    uint64_t ready_at;
    char key[]; /* in the same allocation: a resync timer per pool keeps an item per pool */
} wq_item;

struct wq {
    ev_loop *loop;
    wq_config cfg;
    wq_process_fn process;
    void *ud;
    strmap items;
    wq_item *head, *tail;
    size_t depth, in_flight, waiting;
    uint64_t adds_total, retries_total;
    uint64_t dispatch_timer;
    bool shutdown;
    bool dispatching;    /* inside wq_dispatch: the drained hook must wait until it returns */
    bool drain_deferred; /* the hook is due as soon as wq_dispatch returns */
    wq_drained_fn drained;
    void *drained_ud;
};

static wq_config wq_config_fill(const wq_config *cfg)
{
    wq_config c = cfg ? *cfg : (wq_config){0};
    if (!c.concurrency)
        c.concurrency = 1;
    if (!c.base_delay_ms)
        c.base_delay_ms = 5;
    if (!c.max_delay_ms)
        c.max_delay_ms = 1000 * 1000;
    return c;
}

wq *wq_new(ev_loop *loop, const wq_config *cfg, wq_process_fn process, void *ud)
{
    wq *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    if (strmap_init(&q->items) < 0) {
        free(q);
        return NULL;
    }
    q->loop = loop;
    q->cfg = wq_config_fill(cfg);
    q->process = process;
    q->ud = ud;
    return q;
}

static void wq_item_free(wq *q, wq_item *it)
{
    ev_timer_cancel(q->loop, it->timer);
    strmap_remove(&q->items, &it->node);
    free(it);
}

void wq_free(wq *q)
{
    if (!q)
        return;
    ev_timer_cancel(q->loop, q->dispatch_timer);
    strmap_node *n = strmap_first(&q->items);
    while (n) {
        strmap_node *next = strmap_next(&q->items, n);
        wq_item_free(q, STRMAP_OWNER(n, wq_item, node));
        n = next;
    }
    strmap_fini(&q->items);
    free(q);
}

static wq_item *wq_find(const wq *q, const char *key)
{
    return STRMAP_FIND(&q->items, key, wq_item, node);
}

static wq_item *wq_item_get(wq *q, const char *key)
{
    wq_item *it = STRMAP_FIND_OR_ADD(&q->items, key, wq_item, node, key);
    if (it)
        it->q = q;
    return it;
}

static void wq_item_release_if_idle(wq *q, wq_item *it)
{
    if (!it->dirty && !it->processing && !it->timer && !it->failures)
        wq_item_free(q, it);
}

static void wq_dispatch(ev_loop *loop, void *ud);

/* Makes sure a hand-out is scheduled when one could happen. */
static int wq_arm(wq *q)
{
    if (q->shutdown || q->dispatch_timer || !q->head || q->in_flight >= q->cfg.concurrency)
        return 0;
    q->dispatch_timer = ev_timer_add(q->loop, 0, wq_dispatch, q);
    return q->dispatch_timer ? 0 : -ENOMEM;
}

static void wq_push(wq *q, wq_item *it)
{
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->depth++;
}

static wq_item *wq_pop(wq *q)
{
    wq_item *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    it->next = NULL;
    q->depth--;
    return it;
}

static void wq_maybe_drained(wq *q)
{
    if (!q->shutdown || q->in_flight || !q->drained)
        return;
    if (q->dispatching) {
        q->drain_deferred = true;
        return;
    }
    wq_drained_fn fn = q->drained;
    q->drained = NULL;
    fn(q, q->drained_ud); /* last: the hook may free q */
}

static void wq_dispatch(ev_loop *loop, void *ud)
{
    (void)loop;
    wq *q = ud;
    q->dispatch_timer = 0;
    /* Only the keys queued now: a processor that finishes at once and requeues its key must not
     * keep this loop spinning. */
    size_t budget = q->depth;
    uint64_t now = ev_now_ms();
    q->dispatching = true;
    while (budget-- && !q->shutdown && q->head && q->in_flight < q->cfg.concurrency) {
        wq_item *it = wq_pop(q);
        it->dirty = false;
        it->processing = true;
        q->in_flight++;
        q->process(q, it->key, now - it->queued_at, q->ud);
    }
    q->dispatching = false;
    if (q->drain_deferred) {
        q->drain_deferred = false;
        wq_maybe_drained(q);
        return;
    }
    /* An allocation failure here is retried by the next add or done. */
    (void)wq_arm(q);
}

static int wq_queue(wq *q, wq_item *it)
{
    if (it->dirty)
        return 0;
    it->dirty = true;
    it->queued_at = ev_now_ms();
    q->adds_total++;
    if (!it->processing)
        wq_push(q, it);
    return wq_arm(q);
}

static void wq_ready(ev_loop *loop, void *ud)
{
    (void)loop;
    wq_item *it = ud;
    wq *q = it->q;
    it->timer = 0;
    q->waiting--;
    /* The key is queued even if the hand-out could not be scheduled; the next add or done
     * schedules it. */
    (void)wq_queue(q, it);
}

static int wq_wait(wq *q, wq_item *it, uint64_t delay_ms)
{
    uint64_t ready_at = ev_now_ms() + delay_ms;
    if (it->timer && it->ready_at <= ready_at)
        return 0;
    uint64_t id = ev_timer_add(q->loop, delay_ms, wq_ready, it);
    if (!id)
        return -ENOMEM;
    if (it->timer)
        ev_timer_cancel(q->loop, it->timer);
    else
        q->waiting++;
    it->timer = id;
    it->ready_at = ready_at;
    return 0;
}

int wq_add(wq *q, const char *key)
{
    if (q->shutdown)
        return -ESHUTDOWN;
    wq_item *it = wq_item_get(q, key);
    return it ? wq_queue(q, it) : -ENOMEM;
}

int wq_add_after(wq *q, const char *key, uint64_t delay_ms)
{
    if (delay_ms == 0)
        return wq_add(q, key);
    if (q->shutdown)
        return -ESHUTDOWN;
    wq_item *it = wq_item_get(q, key);
    if (!it)
        return -ENOMEM;
    int rc = wq_wait(q, it, delay_ms);
    wq_item_release_if_idle(q, it);
    return rc;
}

int wq_done(wq *q, const char *key, wq_result result)
{
    wq_item *it = wq_find(q, key);
    if (!it || !it->processing)
        return -ENOENT;
    it->processing = false;
    q->in_flight--;
    int rc = 0;
    if (result == WQ_SUCCESS) {
        it->failures = 0;
    } else if (!q->shutdown) {
        rc = wq_wait(q, it,
                     util_backoff_ms(q->cfg.base_delay_ms, q->cfg.max_delay_ms, it->failures,
                                     util_rng_next()));
        it->failures++;
        q->retries_total++;
    }
    if (it->dirty)
        wq_push(q, it);
    int arm = wq_arm(q);
    wq_item_release_if_idle(q, it);
    wq_maybe_drained(q);
    return rc < 0 ? rc : arm;
}

uint64_t wq_backoff_delay(const wq_config *cfg, unsigned failures)
{
    wq_config c = wq_config_fill(cfg);
    return util_backoff_step_ms(c.base_delay_ms, c.max_delay_ms, failures);
}

uint64_t wq_backoff_ms(const wq *q, const char *key)
{
    wq_item *it = wq_find(q, key);
    return wq_backoff_delay(&q->cfg, it ? it->failures : 0);
}

size_t wq_len(const wq *q)
{
    return q->depth;
}

void wq_stats_get(const wq *q, wq_stats *out)
{
    *out = (wq_stats){.depth = q->depth,
                      .in_flight = q->in_flight,
                      .waiting = q->waiting,
                      .adds_total = q->adds_total,
                      .retries_total = q->retries_total};
}

void wq_shutdown(wq *q, wq_drained_fn drained, void *ud)
{
    q->shutdown = true;
    q->drained = drained;
    q->drained_ud = ud;
    ev_timer_cancel(q->loop, q->dispatch_timer);
    q->dispatch_timer = 0;
    strmap_node *n = strmap_first(&q->items);
    while (n) {
        strmap_node *next = strmap_next(&q->items, n);
        wq_item *it = STRMAP_OWNER(n, wq_item, node);
        if (it->timer) {
            ev_timer_cancel(q->loop, it->timer);
            it->timer = 0;
            q->waiting--;
            wq_item_release_if_idle(q, it);
        }
        n = next;
    }
    wq_maybe_drained(q);
}
