/* ev: one epoll instance plus a binary min-heap of one-shot timers keyed by deadline.
 * fd registrations live in a table indexed by fd (fds are small integers); timers are found by id
 * through a linear scan on cancel, which is fine for the few dozen timers an operator keeps. */
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
    uint64_t id;
    ev_timer_fn fn;
    void *ud;
} ev_timer;

struct ev_loop {
    int epfd;
    bool stop;
    ev_fdreg *fds;
    size_t nfds;
    ev_timer *heap;
    size_t ntimers, cap_timers;
    uint64_t next_id;
};

uint64_t ev_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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
    loop->next_id = 1;
    return loop;
}

void ev_free(ev_loop *loop)
{
    if (!loop)
        return;
    close(loop->epfd);
    free(loop->fds);
    free(loop->heap);
    free(loop);
}

int ev_fd_set(ev_loop *loop, int fd, int events, ev_fd_fn fn, void *ud)
{
    if (fd < 0 || !fn || !(events & (EV_READ | EV_WRITE)))
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

static bool ev_before(const ev_timer *a, const ev_timer *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id);
}

static void ev_heap_swap(ev_loop *loop, size_t i, size_t j)
{
    ev_timer t = loop->heap[i];
    loop->heap[i] = loop->heap[j];
    loop->heap[j] = t;
}

static void ev_heap_up(ev_loop *loop, size_t i)
{
    while (i > 0 && ev_before(&loop->heap[i], &loop->heap[(i - 1) / 2])) {
        ev_heap_swap(loop, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void ev_heap_down(ev_loop *loop, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < loop->ntimers && ev_before(&loop->heap[l], &loop->heap[m]))
            m = l;
        if (r < loop->ntimers && ev_before(&loop->heap[r], &loop->heap[m]))
            m = r;
        if (m == i)
            return;
        ev_heap_swap(loop, i, m);
        i = m;
    }
}

static void ev_heap_remove(ev_loop *loop, size_t i)
{
    loop->heap[i] = loop->heap[--loop->ntimers];
    if (i < loop->ntimers) {
        ev_heap_down(loop, i);
        ev_heap_up(loop, i);
    }
}

uint64_t ev_timer_add(ev_loop *loop, uint64_t delay_ms, ev_timer_fn fn, void *ud)
{
    if (loop->ntimers == loop->cap_timers) {
        size_t n = loop->cap_timers ? loop->cap_timers * 2 : 16;
        ev_timer *grown = realloc(loop->heap, n * sizeof(*grown));
        if (!grown)
            return 0;
        loop->heap = grown;
        loop->cap_timers = n;
    }
    uint64_t id = loop->next_id++;
    loop->heap[loop->ntimers] =
        (ev_timer){.deadline = ev_now_ms() + delay_ms, .id = id, .fn = fn, .ud = ud};
    ev_heap_up(loop, loop->ntimers++);
    return id;
}

void ev_timer_cancel(ev_loop *loop, uint64_t id)
{
    for (size_t i = 0; id && i < loop->ntimers; i++) {
        if (loop->heap[i].id == id) {
            ev_heap_remove(loop, i);
            return;
        }
    }
}

/* Runs every timer whose deadline has passed. A timer added by a callback with delay 0 runs on
 * the next iteration, so a callback that re-arms itself cannot starve I/O. */
static void ev_run_timers(ev_loop *loop)
{
    uint64_t now = ev_now_ms();
    uint64_t last_id = loop->next_id;
    while (loop->ntimers && loop->heap[0].deadline <= now && loop->heap[0].id < last_id &&
           !loop->stop) {
        ev_timer t = loop->heap[0];
        ev_heap_remove(loop, 0);
        t.fn(loop, t.ud);
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
            uint64_t d = loop->heap[0].deadline;
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
            if (evs[i].events & EPOLLOUT)
                mask |= EV_WRITE;
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
