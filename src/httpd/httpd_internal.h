/* httpd_internal: what the server's files share (httpd.c: the MHD daemon and its dispatch; req.c:
 * a request's life; stream.c: streamed answers). Private to src/httpd: the contract is
 * httpd/httpd.h. */
#ifndef MP_HTTPD_INTERNAL_H
#define MP_HTTPD_INTERNAL_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "conns.h"
#include "httpd/httpd.h"

typedef struct httpd_stream {
    unsigned code;
    uint64_t size; /* MHD_SIZE_UNKNOWN unless a Content-Length was given */
    httpd_header *headers;
    size_t nheaders;
    char *buf; /* bytes written and not yet handed to MHD: buf[off, len) */
    size_t off, len, cap;
    bool queued;     /* the MHD response exists */
    bool ended, ok;  /* httpd_req_stream_end called */
    bool want_drain; /* a write returned 1 */
    void (*drain)(void *ud);
    void *drain_ud;
    uint64_t drain_timer;
} httpd_stream;

struct httpd_req {
    httpd *h;
    struct MHD_Connection *conn;
    const char *method, *path; /* MHD's, valid for the request's life */
    httpd_reply reply;
    bool replied; /* httpd_req_reply called */
    bool queued;  /* the reply is MHD's */
    bool suspended;
    bool past_headers; /* MHD was let past the headers: a call with no data now means the end */
    bool closed;       /* ended under its owner: its work is cancelled (or being cancelled) */
    bool peer_gone;    /* the client closed while the req waited: MHD must drop it */
    bool watching;     /* fd is in the loop, watched for the client's close while asleep */
    bool eof_seen; /* the client sent its end of file (probed): an error or hang-up is watched */
    bool http11;   /* the request line says HTTP/1.1 (an interim 1xx may be sent) */
    int fd;
    httpd_body_fn body;
    void *body_ud;
    bool body_paused, body_ended;
    size_t discarded; /* body bytes dropped after an early answer */
    httpd_stream *stream;
    httpd_work *work;       /* registered work, newest first */
    httpd_req *prev, *next; /* the server's list of requests being answered asynchronously */
};

/* One piece of work started for a request: its cancel runs if the request ends unfinished. */
struct httpd_work {
    httpd_req *r; /* NULL once unlinked (its cancel runs, or it is done) */
    void (*cancel)(void *ud);
    void *ud;
    httpd_work *prev, *next;
};

struct httpd {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    int port;
    uint64_t timer;
    httpd_answer_fn answer;
    httpd_request_fn request;
    void *ud;
    char *tls_cert, *tls_key; /* kept until MHD stops: it may read them after the start */
    httpd_req *reqs;
    httpd_conns *conns; /* the limits MHD lacks, and the count of open connections */
    bool stopping;      /* inside httpd_stop: nothing is scheduled on the loop any more */
    char lasterr[160];  /* MHD's last log line: the reason a start failed */
};

/* ---- httpd.c ---- */

/* Runs MHD from the loop soon (not from inside the caller, which may be any callback). */
void httpd_kick(httpd *h);

/* ---- req.c ---- */

/* Queues a plain reply (its body then MHD's) on conn. */
enum MHD_Result httpd_queue(struct MHD_Connection *conn, httpd_reply *r);
void httpd_req_unwatch(httpd_req *r);
/* r ended under its owner: every piece of work registered for it is cancelled, once. */
void httpd_req_gone(httpd_req *r);
/* r's connection waits, suspended, its socket watched for the client leaving. */
void httpd_req_sleep(httpd_req *r);
/* r's connection is resumed and MHD run from the loop. */
void httpd_req_wake(httpd_req *r);
void httpd_req_free(httpd_req *r);
bool httpd_req_answered(const httpd_req *r);
/* One step of a request's life, each time MHD calls for it. */
enum MHD_Result httpd_req_step(httpd_req *r, const char *upload, size_t *upload_size);

/* ---- stream.c ---- */

/* Hands r's stream to MHD as its response. */
enum MHD_Result httpd_stream_queue(httpd_req *r);
void httpd_stream_free(ev_loop *loop, httpd_stream *st);

#endif
