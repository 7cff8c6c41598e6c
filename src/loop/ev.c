/* ev: one epoll instance plus a binary min-heap of one-shot timers keyed by deadline.
 * fd registrations live in a table indexed by fd (fds are small integers). A timer lives in a slot
 * that knows its place in the heap, and its id names the slot and the slot's generation, so a
 * cancel finds it in O(1) and removes it in O(log n): a resync timer per pool is 10,000 timers. */
#include "loop/ev.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    ev_fd_fn fn;
    void *ud;
    int events; /* 0: not registered */
} ev_fdreg;

typedef struct {
    uint64_t deadline;
    uint64_t seq; /* order of adding: breaks ties, and bounds what one round runs */
    ev_timer_fn fn;
    void *ud;
    uint32_t gen; /* part of the id; bumped when the slot is freed, so a stale id misses */
    uint32_t pos; /* armed: its index in the heap; free: the next free slot */
    bool armed;
} ev_slot;

#define EV_NO_SLOT UINT32_MAX

struct ev_loop {
    int epfd;
    bool stop;
    ev_fdreg *fds;
    size_t nfds;
    ev_slot *slots;
    uint32_t nslots, free_slot;
    uint32_t *heap; /* slot indices, a min-heap by (deadline, seq) */
    size_t ntimers;
    uint64_t next_seq;
};

uint64_t ev_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t ev_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t ev_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

ev_loop *ev_new(void)
{
    ev_loop *loop = calloc(1, sizeof(*loop));
    if (!loop)
        return NULL;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        free(loop);
        return NULL;
    }
    loop->next_seq = 1;
    loop->free_slot = EV_NO_SLOT;
    return loop;
}

void ev_free(ev_loop *loop)
{
    if (!loop)
        return;
    close(loop->epfd);
    free(loop->fds);
    free(loop->slots);
    free(loop->heap);
    free(loop);
}

int ev_fd_set(ev_loop *loop, int fd, int events, ev_fd_fn fn, void *ud)
{
    if (fd < 0 || !fn || !(events & (EV_READ | EV_WRITE | EV_ERROR | EV_HANGUP)))
        return -EINVAL;
    if ((size_t)fd >= loop->nfds) {
        size_t n = loop->nfds ? loop->nfds : 64;
        while (n <= (size_t)fd)
            n *= 2;
        ev_fdreg *grown = realloc(loop->fds, n * sizeof(*grown));
        if (!grown)
            return -ENOMEM;
        memset(grown + loop->nfds, 0, (n - loop->nfds) * sizeof(*grown));
        loop->fds = grown;
        loop->nfds = n;
    }
    struct epoll_event ee = {.data.fd = fd};
    if (events & EV_READ)
        ee.events |= EPOLLIN;
    if (events & EV_WRITE)
        ee.events |= EPOLLOUT;
    if (events & EV_HANGUP)
        ee.events |= EPOLLRDHUP;
    int op = loop->fds[fd].events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(loop->epfd, op, fd, &ee) < 0)
        return -errno;
    loop->fds[fd] = (ev_fdreg){.fn = fn, .ud = ud, .events = events};
    return 0;
}

void ev_fd_clear(ev_loop *loop, int fd)
{
    if (fd < 0 || (size_t)fd >= loop->nfds || !loop->fds[fd].events)
        return;
    /* The fd may already be closed (libcurl tells us after close); then the kernel dropped it. */
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
    loop->fds[fd] = (ev_fdreg){0};
}

static bool ev_before(const ev_loop *loop, size_t i, size_t j)
{
    const ev_slot *a = &loop->slots[loop->heap[i]], *b = &loop->slots[loop->heap[j]];
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void ev_heap_set(ev_loop *loop, size_t i, uint32_t slot)
{
    loop->heap[i] = slot;
    loop->slots[slot].pos = (uint32_t)i;
}

static void ev_heap_swap(ev_loop *loop, size_t i, size_t j)
{
    uint32_t t = loop->heap[i];
    ev_heap_set(loop, i, loop->heap[j]);
    ev_heap_set(loop, j, t);
}

static void ev_heap_up(ev_loop *loop, size_t i)
{
    while (i > 0 && ev_before(loop, i, (i - 1) / 2)) {
        ev_heap_swap(loop, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void ev_heap_down(ev_loop *loop, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < loop->ntimers && ev_before(loop, l, m))
            m = l;
        if (r < loop->ntimers && ev_before(loop, r, m))
            m = r;
        if (m == i)
            return;
        ev_heap_swap(loop, i, m);
        i = m;
    }
}

/* Takes the timer at heap index i out of the heap and frees its slot. */
static void ev_heap_remove(ev_loop *loop, size_t i)
{
    uint32_t slot = loop->heap[i];
    if (i < --loop->ntimers) {
        ev_heap_set(loop, i, loop->heap[loop->ntimers]);
        ev_heap_down(loop, i);
        ev_heap_up(loop, i);
    }
    ev_slot *t = &loop->slots[slot];
    t->armed = false;
    t->gen = t->gen == UINT32_MAX ? 1 : t->gen + 1;
    t->pos = loop->free_slot;
    loop->free_slot = slot;
}

/* A free slot (the heap has room for one more timer then), or EV_NO_SLOT when out of memory. */
static uint32_t ev_slot_take(ev_loop *loop)
{
    if (loop->free_slot == EV_NO_SLOT) {
        if (loop->nslots >= EV_NO_SLOT / 2)
            return EV_NO_SLOT;
        uint32_t n = loop->nslots ? loop->nslots * 2 : 16;
        ev_slot *slots = realloc(loop->slots, n * sizeof(*slots));
        if (!slots)
            return EV_NO_SLOT;
        loop->slots = slots;
        uint32_t *heap = realloc(loop->heap, n * sizeof(*heap));
        if (!heap)
            return EV_NO_SLOT;
        loop->heap = heap;
        for (uint32_t i = n; i-- > loop->nslots;) {
            slots[i] = (ev_slot){.gen = 1, .pos = loop->free_slot};
            loop->free_slot = i;
        }
        loop->nslots = n;
    }
    uint32_t slot = loop->free_slot;
    loop->free_slot = loop->slots[slot].pos;
    return slot;
}

uint64_t ev_timer_add(ev_loop *loop, uint64_t delay_ms, ev_timer_fn fn, void *ud)
{
    uint32_t slot = ev_slot_take(loop);
    if (slot == EV_NO_SLOT)
        return 0;
    ev_slot *t = &loop->slots[slot];
    t->deadline = ev_now_ms() + delay_ms;
    t->seq = loop->next_seq++;
    t->fn = fn;
    t->ud = ud;
    t->armed = true;
    ev_heap_set(loop, loop->ntimers, slot);
    ev_heap_up(loop, loop->ntimers++);
    return (uint64_t)t->gen << 32 | slot;
}

void ev_timer_cancel(ev_loop *loop, uint64_t id)
{
    uint32_t slot = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (!id || slot >= loop->nslots)
        return;
    const ev_slot *t = &loop->slots[slot];
    if (t->armed && t->gen == gen)
        ev_heap_remove(loop, t->pos);
}

/* Runs every timer whose deadline has passed. A timer added by a callback with delay 0 runs on
 * the next iteration, so a callback that re-arms itself cannot starve I/O. */
static void ev_run_timers(ev_loop *loop)
{
    uint64_t now = ev_now_ms();
    uint64_t last_seq = loop->next_seq;
    while (loop->ntimers && !loop->stop) {
        const ev_slot *t = &loop->slots[loop->heap[0]];
        if (t->deadline > now || t->seq >= last_seq)
            break;
        ev_timer_fn fn = t->fn;
        void *ud = t->ud;
        ev_heap_remove(loop, 0);
        fn(loop, ud);
    }
}

int ev_run(ev_loop *loop)
{
    struct epoll_event evs[64];
    loop->stop = false;
    while (!loop->stop) {
        int timeout = -1;
        if (loop->ntimers) {
            uint64_t now = ev_now_ms();
            uint64_t d = loop->slots[loop->heap[0]].deadline;
            timeout = d <= now ? 0 : (d - now > 60000 ? 60000 : (int)(d - now));
        }
        int n = epoll_wait(loop->epfd, evs, 64, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        for (int i = 0; i < n && !loop->stop; i++) {
            int fd = evs[i].data.fd;
            /* An earlier callback in this batch may have cleared this fd. */
            if ((size_t)fd >= loop->nfds || !loop->fds[fd].events)
                continue;
            int mask = 0;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                mask |= EV_READ;
            if (evs[i].events & (EPOLLERR | EPOLLHUP))
                mask |= EV_ERROR;
            if (evs[i].events & EPOLLOUT)
                mask |= EV_WRITE;
            if (evs[i].events & EPOLLRDHUP)
                mask |= EV_HANGUP;
            ev_fdreg r = loop->fds[fd];
            r.fn(loop, fd, mask, r.ud);
        }
        ev_run_timers(loop);
    }
    return 0;
}

void ev_stop(ev_loop *loop)
{
    loop->stop = true;
}
