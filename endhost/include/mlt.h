/*
 * mlt.h - the C interface of mltctl's end-host transport (libendhost).
 *
 * MLT's asynchronous operation and completion model (MLT NSDI'24, section 5.1):
 * post sends, receives and allreduces, then poll a completion queue.
 *
 * Buffers: a send's values are copied when it is posted. A receive or an allreduce
 * writes its result into the caller's buffer when its completion is polled, so that
 * buffer must stay valid and untouched until then.
 *
 * Errors: functions that fail return NULL or -1 and leave a message that
 * mlt_last_error() returns (per thread).
 *
 * Threads: every function but mlt_stop may be called on one transport from several
 * threads at once: posts take turns, and a thread waiting in mlt_wait_cq never holds
 * up a posting one. mlt_stop must be the last call on a transport, made once no other
 * call on it is under way.
 */
#ifndef MLT_H
#define MLT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct MltTransport mlt_transport;

typedef struct mlt_completion {
    uint64_t op;          /* the handle the post returned */
    int32_t status;       /* 0: done; -1: failed, see error */
    double delivered;     /* fraction of the values that arrived (1 for sends) */
    double exact;         /* fraction of the result's values no loss reached */
    uint64_t elapsed_ns;  /* from post to completion */
    char error[256];      /* NUL-terminated reason when status is -1 */
} mlt_completion;

/* Starts the transport from a host configuration (JSON, as `mltctl plan --host NAME`
 * prints it), waiting up to connect_timeout_ms for every peer. NULL on failure. */
mlt_transport *mlt_start(const char *config_json, uint32_t connect_timeout_ms);

/* The last error on this thread, or "". Valid until the next call on this thread. */
const char *mlt_last_error(void);

/* Sends len values to rank peer as the next message of tensor, with the priority
 * (DSCP) of layer. Returns the operation's handle, or -1. */
int64_t mlt_post_send(mlt_transport *t, uint32_t peer, uint32_t tensor,
                      const float *data, size_t len, uint16_t layer);

/* Receives the next message of tensor from rank peer: len values, complete once all
 * but loss_bound (0: exact delivery) of them arrived. Returns the handle, or -1. */
int64_t mlt_post_recv(mlt_transport *t, uint32_t peer, uint32_t tensor,
                      float *out, size_t len, double loss_bound);

/* Sums data over every rank of the job (the job's collective), in place. Returns the
 * handle, or -1. */
int64_t mlt_post_allreduce(mlt_transport *t, uint32_t tensor, float *data, size_t len,
                           uint16_t layer, double loss_bound);

/* Takes the next completion: 1 and *out filled, 0 if there is none, -1 on error.
 * mlt_poll_cq never blocks; mlt_wait_cq waits up to timeout_ms. */
int mlt_poll_cq(mlt_transport *t, mlt_completion *out);
int mlt_wait_cq(mlt_transport *t, mlt_completion *out, uint32_t timeout_ms);

/* Finishes the operations in flight and frees the transport. */
void mlt_stop(mlt_transport *t);

#ifdef __cplusplus
}
#endif

#endif /* MLT_H */
