/* evcurl: binds one libcurl multi handle to the ev loop (CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION),
 * so any number of transfers run on the process's one thread. The owner adds easy handles to
 * evcurl_multi() and reads finished ones with curl_multi_info_read in its progress callback. */
#ifndef MP_LOOP_EVCURL_H
#define MP_LOOP_EVCURL_H

#include <curl/curl.h>

#include "loop/ev.h"

typedef struct evcurl evcurl;

/* Runs from the loop after every curl_multi_socket_action (never inside a curl callback), so the
 * owner may add, remove and clean up easy handles in it, and even evcurl_free the evcurl. */
typedef void (*evcurl_progress_fn)(void *ud);

/* NULL when out of memory or curl cannot make a multi handle. */
evcurl *evcurl_new(ev_loop *loop, evcurl_progress_fn progress, void *ud);
/* Frees the multi handle: the sockets of the connections it still caches are closed and cleared
 * from the loop, its timer is cancelled. Remove (and clean up) every easy handle first; not
 * from inside a curl callback. A no-op for NULL. */
void evcurl_free(evcurl *ec);
/* Adding an easy handle to it arms a 0 ms timer, so a transfer starts on the next loop turn. */
CURLM *evcurl_multi(evcurl *ec);

#endif
