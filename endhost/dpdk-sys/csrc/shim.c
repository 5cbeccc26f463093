/* Real symbols for what DPDK 22.11 offers only as static-inline functions or macros;
 * port setup, flow rules and the packed mbuf pool kept on the C side so that Rust never
 * mirrors rte_eth_conf, rte_flow items or mempool internals. */
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_ring.h>

int shim_errno(void) { return rte_errno; }

uint64_t shim_rdtsc(void) { return rte_rdtsc(); }

uint16_t shim_default_buf_size(void) { return RTE_MBUF_DEFAULT_BUF_SIZE; }

struct shim_port_info {
    uint16_t max_rx_queues;
    uint16_t max_tx_queues;
    char driver[32];
};

int shim_port_info(uint16_t port, struct shim_port_info *out)
{
    struct rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0)
        return rc;
    out->max_rx_queues = info.max_rx_queues;
    out->max_tx_queues = info.max_tx_queues;
    strncpy(out->driver, info.driver_name ? info.driver_name : "", sizeof out->driver - 1);
    out->driver[sizeof out->driver - 1] = 0;
    return 0;
}

/* Configures `nb_rxq` RX queues (RSS over IP and UDP ports where the device hashes)
 * and `nb_txq` TX queues (the caller sends on queue 0; af_xdp wants them paired),
 * adjusts the ring sizes to the device's limits (written back),
 * sets the MTU where the device allows it, and starts the port. On failure returns a
 * negative errno and names the step that failed. */
int shim_port_setup(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint16_t *rx_desc,
                    uint16_t *tx_desc,
                    struct rte_mempool *pool, uint16_t mtu, const char **step)
{
    struct rte_eth_conf conf;
    struct rte_eth_dev_info info;
    int rc;

    memset(&conf, 0, sizeof conf);
    *step = "rte_eth_dev_info_get";
    rc = rte_eth_dev_info_get(port, &info);
    if (rc != 0)
        return rc;
    uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    if (nb_rxq > 1 && rss != 0) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
    }
    *step = "rte_eth_dev_configure";
    rc = rte_eth_dev_configure(port, nb_rxq, nb_txq, &conf);
    if (rc != 0)
        return rc;
    *step = "rte_eth_dev_adjust_nb_rx_tx_desc";
    rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, rx_desc, tx_desc);
    if (rc != 0)
        return rc;
    int socket = rte_eth_dev_socket_id(port);
    for (uint16_t q = 0; q < nb_rxq; q++) {
        *step = "rte_eth_rx_queue_setup";
        rc = rte_eth_rx_queue_setup(port, q, *rx_desc, socket, NULL, pool);
        if (rc != 0)
            return rc;
    }
    for (uint16_t q = 0; q < nb_txq; q++) {
        *step = "rte_eth_tx_queue_setup";
        rc = rte_eth_tx_queue_setup(port, q, *tx_desc, socket, NULL);
        if (rc != 0)
            return rc;
    }
    *step = "rte_eth_dev_set_mtu";
    rc = rte_eth_dev_set_mtu(port, mtu);
    if (rc != 0 && rc != -ENOTSUP)
        return rc;
    *step = "rte_eth_dev_start";
    return rte_eth_dev_start(port);
}

struct shim_port_stats {
    uint64_t ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf;
};

int shim_port_stats(uint16_t port, struct shim_port_stats *out)
{
    struct rte_eth_stats stats;
    int rc = rte_eth_stats_get(port, &stats);
    if (rc != 0)
        return rc;
    out->ipackets = stats.ipackets;
    out->opackets = stats.opackets;
    out->ibytes = stats.ibytes;
    out->obytes = stats.obytes;
    out->imissed = stats.imissed;
    out->ierrors = stats.ierrors;
    out->oerrors = stats.oerrors;
    out->rx_nombuf = stats.rx_nombuf;
    return 0;
}

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *pool) { return rte_pktmbuf_alloc(pool); }

/* `n` fresh mbufs, all or none: 0, or a negative errno. */
int shim_pktmbuf_alloc_bulk(struct rte_mempool *pool, struct rte_mbuf **mbufs, unsigned n)
{
    return rte_pktmbuf_alloc_bulk(pool, mbufs, n);
}

/* Gives back to `pool` what the calling lcore's cache of it holds. */
void shim_mempool_flush_own_cache(struct rte_mempool *pool)
{
    struct rte_mempool_cache *cache = rte_mempool_default_cache(pool, rte_lcore_id());
    if (cache != NULL)
        rte_mempool_cache_flush(cache, pool);
}

/* Gives the calling thread an lcore id, and with it a cache of its own in every
 * mempool, unless it has one: 1 when this call registered it, 0 when it already had
 * an id, -1 when none was free (the thread goes on without a cache). */
int shim_thread_register(void)
{
    if (rte_lcore_id() != LCORE_ID_ANY)
        return 0;
    return rte_thread_register() == 0 && rte_lcore_id() != LCORE_ID_ANY ? 1 : -1;
}

void shim_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

/* The first segment's data and its length. */
uint8_t *shim_mbuf_data(struct rte_mbuf *m, uint16_t *len)
{
    *len = m->data_len;
    return rte_pktmbuf_mtod(m, uint8_t *);
}

/* Room for `len` more bytes at the end, or NULL when the buffer is too small. */
uint8_t *shim_mbuf_append(struct rte_mbuf *m, uint16_t len)
{
    return (uint8_t *)rte_pktmbuf_append(m, len);
}

/* Keeps the first `len` bytes of a single-segment mbuf. */
void shim_mbuf_keep(struct rte_mbuf *m, uint16_t len)
{
    if (len < m->data_len) {
        m->pkt_len -= m->data_len - len;
        m->data_len = len;
    }
}

uint16_t shim_mbuf_segments(const struct rte_mbuf *m) { return m->nb_segs; }

/* Asks for the first cache line of the frame in `m` ahead of reading it. */
void shim_mbuf_prefetch(const struct rte_mbuf *m)
{
    rte_prefetch0(rte_pktmbuf_mtod(m, const void *));
}

unsigned shim_ring_enqueue_burst(struct rte_ring *r, struct rte_mbuf **objs, unsigned n)
{
    return rte_ring_enqueue_burst(r, (void *const *)objs, n, NULL);
}

unsigned shim_ring_dequeue_burst(struct rte_ring *r, struct rte_mbuf **objs, unsigned n)
{
    return rte_ring_dequeue_burst(r, (void **)objs, n, NULL);
}

unsigned shim_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }

/* Flow isolation (rte_flow), for NICs DPDK shares with the kernel: in isolated mode the
 * PMD gets only what a rule claims. On failure, the driver's message. */
int shim_flow_isolate(uint16_t port, int set, const char **message)
{
    struct rte_flow_error error;
    memset(&error, 0, sizeof error);
    int rc = rte_flow_isolate(port, set, &error);
    if (rc != 0)
        *message = error.message ? error.message : "rte_flow_isolate refused";
    return rc;
}

/* One rule: UDP to `dst_be` (network order) port `dst_port`, from `src_port` (or any
 * source port when negative), to RX queue `queue`; validated, then created. */
int shim_flow_udp_to_queue(uint16_t port, uint32_t dst_be, uint16_t dst_port, int32_t src_port,
                           uint16_t queue, uint32_t priority, const char **message)
{
    struct rte_flow_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.ingress = 1;
    attr.priority = priority;
    struct rte_flow_item_ipv4 ip_spec, ip_mask;
    memset(&ip_spec, 0, sizeof ip_spec);
    memset(&ip_mask, 0, sizeof ip_mask);
    ip_spec.hdr.dst_addr = dst_be;
    ip_mask.hdr.dst_addr = 0xffffffff;
    struct rte_flow_item_udp udp_spec, udp_mask;
    memset(&udp_spec, 0, sizeof udp_spec);
    memset(&udp_mask, 0, sizeof udp_mask);
    udp_spec.hdr.dst_port = rte_cpu_to_be_16(dst_port);
    udp_mask.hdr.dst_port = 0xffff;
    if (src_port >= 0) {
        udp_spec.hdr.src_port = rte_cpu_to_be_16((uint16_t)src_port);
        udp_mask.hdr.src_port = 0xffff;
    }
    struct rte_flow_item pattern[4];
    memset(pattern, 0, sizeof pattern);
    pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
    pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
    pattern[1].spec = &ip_spec;
    pattern[1].mask = &ip_mask;
    pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
    pattern[2].spec = &udp_spec;
    pattern[2].mask = &udp_mask;
    pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
    struct rte_flow_action_queue to_queue = {.index = queue};
    struct rte_flow_action actions[2];
    memset(actions, 0, sizeof actions);
    actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
    actions[0].conf = &to_queue;
    actions[1].type = RTE_FLOW_ACTION_TYPE_END;
    struct rte_flow_error error;
    memset(&error, 0, sizeof error);
    int rc = rte_flow_validate(port, &attr, pattern, actions, &error);
    if (rc != 0) {
        *message = error.message ? error.message : "rte_flow_validate refused the rule";
        return rc;
    }
    if (rte_flow_create(port, &attr, pattern, actions, &error) == NULL) {
        *message = error.message ? error.message : "rte_flow_create failed";
        return rte_errno ? -rte_errno : -1;
    }
    return 0;
}

/* An mbuf pool whose objects lie back to back in virtual memory, without the padding
 * that keeps each within one IOVA-contiguous page: for virtual devices, which do no
 * DMA. af_xdp maps the pool as its UMEM at one stride from its first object, so an
 * object padded out of that stride (each mbuf on a 4 KiB page of its own without
 * hugepages) would lie outside the UMEM. Returns NULL with rte_errno set. */
struct rte_mempool *shim_pktmbuf_pool_create_packed(const char *name, unsigned n, unsigned cache,
                                                    uint16_t data_room, int socket)
{
    struct rte_pktmbuf_pool_private private;
    memset(&private, 0, sizeof private);
    private.mbuf_data_room_size = data_room;
    struct rte_mempool *mp =
        rte_mempool_create_empty(name, n, sizeof(struct rte_mbuf) + data_room, cache,
                                 sizeof private, socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (mp == NULL)
        return NULL;
    int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
    if (rc == 0) {
        rte_pktmbuf_pool_init(mp, &private);
        rc = rte_mempool_populate_default(mp);
    }
    if (rc < 0) {
        rte_mempool_free(mp);
        rte_errno = -rc;
        return NULL;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
}

/* Whether the port's link is up now (without waiting). */
int shim_link_up(uint16_t port)
{
    struct rte_eth_link link;
    memset(&link, 0, sizeof link);
    if (rte_eth_link_get_nowait(port, &link) != 0)
        return 0;
    return link.link_status == RTE_ETH_LINK_UP;
}
