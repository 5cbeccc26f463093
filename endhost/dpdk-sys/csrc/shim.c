/* Real symbols for what DPDK 22.11 offers only as static-inline functions or macros,
 * and port setup kept on the C side so that Rust never mirrors rte_eth_conf. */
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
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
 * and one TX queue, adjusts the ring sizes to the device's limits (written back),
 * sets the MTU where the device allows it, and starts the port. On failure returns a
 * negative errno and names the step that failed. */
int shim_port_setup(uint16_t port, uint16_t nb_rxq, uint16_t *rx_desc, uint16_t *tx_desc,
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
    rc = rte_eth_dev_configure(port, nb_rxq, 1, &conf);
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
    *step = "rte_eth_tx_queue_setup";
    rc = rte_eth_tx_queue_setup(port, 0, *tx_desc, socket, NULL);
    if (rc != 0)
        return rc;
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

/* Drops `len` bytes from the front; 0 on success. */
int shim_mbuf_adj(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_adj(m, len) ? 0 : -1; }

/* Keeps the first `len` bytes of a single-segment mbuf. */
void shim_mbuf_keep(struct rte_mbuf *m, uint16_t len)
{
    if (len < m->data_len) {
        m->pkt_len -= m->data_len - len;
        m->data_len = len;
    }
}

uint16_t shim_mbuf_segments(const struct rte_mbuf *m) { return m->nb_segs; }

unsigned shim_ring_enqueue_burst(struct rte_ring *r, struct rte_mbuf **objs, unsigned n)
{
    return rte_ring_enqueue_burst(r, (void *const *)objs, n, NULL);
}

unsigned shim_ring_dequeue_burst(struct rte_ring *r, struct rte_mbuf **objs, unsigned n)
{
    return rte_ring_dequeue_burst(r, (void **)objs, n, NULL);
}

unsigned shim_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }
