/* evcurl: curl's socket callback maps to ev_fd_set/ev_fd_clear and its timer callback to one ev
 * timer; every curl_multi_socket_action runs from the loop, never from inside curl, which the
 * multi_socket API forbids. Nothing touches the evcurl after the progress callback returns, so
 * that callback may even free it. */
#include "loop/evcurl.h"

#include <stdlib.h>

struct evcurl {
    ev_loop *loop;
    CURLM *multi;
    uint64_t timer;
    evcurl_progress_fn progress;
    void *ud;
};

static void evcurl_action(evcurl *ec, curl_socket_t s, int what)
{
    int running;
    curl_multi_socket_action(ec->multi, s, what, &running);
    ec->progress(ec->ud); /* last: it may free ec */
}

static void evcurl_on_fd(ev_loop *loop, int fd, int events, void *ud)
{
    (void)loop;
    evcurl_action(ud, fd,
                  (events & EV_READ ? CURL_CSELECT_IN : 0) |
                      (events & EV_WRITE ? CURL_CSELECT_OUT : 0));
}

static void evcurl_on_timer(ev_loop *loop, void *ud)
{
    (void)loop;
    evcurl *ec = ud;
    ec->timer = 0;
    evcurl_action(ec, CURL_SOCKET_TIMEOUT, 0);
}

/* A failure to watch a socket or arm a timer would leave transfers hanging; returning -1 makes
 * curl fail them instead. */
static int evcurl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *sockp)
{
    (void)easy;
    (void)sockp;
    evcurl *ec = userp;
    if (what == CURL_POLL_REMOVE) {
        ev_fd_clear(ec->loop, s);
        return 0;
    }
    int events = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    return ev_fd_set(ec->loop, s, events, evcurl_on_fd, ec) < 0 ? -1 : 0;
}

static int evcurl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    evcurl *ec = userp;
    ev_timer_cancel(ec->loop, ec->timer);
    ec->timer = 0;
    if (timeout_ms < 0)
        return 0;
    /* Even a 0 ms timeout goes through the loop: socket_action must not run inside this callback.
     */
    ec->timer = ev_timer_add(ec->loop, (uint64_t)timeout_ms, evcurl_on_timer, ec);
    return ec->timer ? 0 : -1;
}

evcurl *evcurl_new(ev_loop *loop, evcurl_progress_fn progress, void *ud)
{
    evcurl *ec = calloc(1, sizeof(*ec));
    if (!ec)
        return NULL;
    ec->loop = loop;
    ec->progress = progress;
    ec->ud = ud;
    ec->multi = curl_multi_init();
    if (!ec->multi || curl_multi_setopt(ec->multi, CURLMOPT_SOCKETFUNCTION, evcurl_socket_cb) ||
        curl_multi_setopt(ec->multi, CURLMOPT_SOCKETDATA, ec) ||
        curl_multi_setopt(ec->multi, CURLMOPT_TIMERFUNCTION, evcurl_timer_cb) ||
        curl_multi_setopt(ec->multi, CURLMOPT_TIMERDATA, ec)) {
        evcurl_free(ec);
        return NULL;
    }
    return ec;
}

void evcurl_free(evcurl *ec)
{
    if (!ec)
        return;
    if (ec->multi) {
        /* Closing the cached connections tells the socket callback, which clears their fds from
         * the loop; the timer callback is unhooked first so that it cannot arm a timer for an
         * evcurl about to be freed. */
        curl_multi_setopt(ec->multi, CURLMOPT_TIMERFUNCTION, NULL);
        curl_multi_cleanup(ec->multi);
    }
    ev_timer_cancel(ec->loop, ec->timer);
    free(ec);
}

CURLM *evcurl_multi(evcurl *ec)
{
    return ec->multi;
}
