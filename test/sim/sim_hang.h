/* sim_hang: a listener for a simulated Pod whose idle probe hangs (annotation
 * sim.modelpool.test/probe: "hang"). It accepts connections and reads their requests but answers
 * none, until the simulator releases them (answered then) or the Pod goes (closed unanswered). */
#ifndef MP_SIM_HANG_H
#define MP_SIM_HANG_H

#include <stddef.h>

#include "loop/ev.h"
#include "sim_isvc.h"

typedef struct sim_hang sim_hang;

/* What a released request is answered: the reply to GET path. */
typedef void (*sim_hang_answer_fn)(void *ud, const char *path, sim_reply *out);

/* Told of each request as it is held (path as the request line names it). */
typedef void (*sim_hang_held_fn)(void *ud, const char *path);

/* Listens on ip:port (IPv4); held (may be NULL) is told of each request it holds. NULL when it
 * cannot listen, with the reason in err. */
sim_hang *sim_hang_start(ev_loop *loop, const char *ip, int port, sim_hang_held_fn held, void *ud,
                         char *err, size_t errlen);
/* Stops listening. With answer, every complete request held is answered (then closed); without,
 * every connection is closed unanswered. NULL is a no-op. */
void sim_hang_stop(sim_hang *h, sim_hang_answer_fn answer, void *ud);

#endif
