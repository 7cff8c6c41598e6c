/* ev: the process's one event loop (epoll + a timer heap), in the spirit of Redis's ae.c.
 * Every I/O source (libcurl's sockets, the signal fd, HTTP servers) and every timer runs from
 * ev_run() on one thread, so the rest of the code needs no locks. */
#ifndef MP_LOOP_EV_H
#define MP_LOOP_EV_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ev_loop ev_loop;

/* EV_ERROR alone watches for errors and hang-ups only (epoll reports those whatever is asked):
 * for a socket whose end of file, always readable, must not wake the loop again and again.
 * EV_HANGUP watches a stream socket for its peer's end of file (EPOLLRDHUP), which the kernel
 * reports once the bytes before it have arrived, read or not: bytes waiting to be read do not
 * wake the loop, as they would with EV_READ. */
enum { EV_READ = 1, EV_WRITE = 2, EV_ERROR = 4, EV_HANGUP = 8 };

/* Called when fd is ready; events is a mask of EV_READ/EV_WRITE (errors and hang-ups are
 * reported as EV_READ so the owner's read sees them, and as EV_ERROR), and EV_HANGUP when the
 * peer's end of file arrived (asked for or not). */
typedef void (*ev_fd_fn)(ev_loop *loop, int fd, int events, void *ud);
/* Called once when a timer fires; the timer is already gone when it runs. */
typedef void (*ev_timer_fn)(ev_loop *loop, void *ud);

/* Returns NULL on failure (errno set). */
ev_loop *ev_new(void);
/* Frees the loop; fds and timers still registered are forgotten, not closed or run. */
void ev_free(ev_loop *loop);

/* Watches fd for events (replacing any earlier registration of fd). 0 or -errno. */
int ev_fd_set(ev_loop *loop, int fd, int events, ev_fd_fn fn, void *ud);
/* Stops watching fd; a no-op for an fd that is not watched. */
void ev_fd_clear(ev_loop *loop, int fd);

/* One-shot timer after delay_ms. Returns an id > 0, or 0 on allocation failure. */
uint64_t ev_timer_add(ev_loop *loop, uint64_t delay_ms, ev_timer_fn fn, void *ud);
/* Cancels a pending timer; a no-op for 0, a fired or an unknown id. */
void ev_timer_cancel(ev_loop *loop, uint64_t id);

/* Runs until ev_stop(). Returns 0, or -errno if epoll itself fails. */
int ev_run(ev_loop *loop);
/* Makes ev_run() return after the current iteration. Safe to call from any callback. */
void ev_stop(ev_loop *loop);

/* Monotonic clock in milliseconds (CLOCK_MONOTONIC). */
uint64_t ev_now_ms(void);
/* The same clock in microseconds, for latency measurements. */
uint64_t ev_now_us(void);
/* Wall-clock time in milliseconds since the Unix epoch (CLOCK_REALTIME): for times other
 * processes read (the API's timestamps), never for timeouts. */
uint64_t ev_wall_ms(void);

#endif
