/* The XDP program of endhost's af_xdp path: UDP datagrams to the job's data port go to
 * the AF_XDP socket of the queue they arrived on (DPDK's net_af_xdp PMD fills
 * `xsks_map`); everything else — ARP, the TCP control channel, SSH, other UDP — passes
 * to the kernel, so one NIC serves DPDK's data and the kernel's control.
 *
 * The data port is not compiled in: endhost writes it into `mlt_xdp_config` (found by
 * its magic) in a copy of this object before the PMD loads it; libbpf loads the
 * section as read-only data, so the verifier sees a constant. Fragments pass (only a
 * first fragment has a UDP header, and the transport never fragments). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct mlt_xdp_config {
    char magic[8];
    __u16 data_port;
    __u16 reserved;
};

volatile const struct mlt_xdp_config mlt_xdp_config = {
    .magic = {'M', 'L', 'T', 'X', 'D', 'P', 'v', '1'},
    .data_port = 0,
};

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int mlt_redirect(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_PASS;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
        return XDP_PASS;
    /* More fragments, or an offset: not a whole datagram. */
    if (ip->frag_off & bpf_htons(0x3fff))
        return XDP_PASS;
    struct udphdr *udp = (void *)ip + ip->ihl * 4;
    if ((void *)(udp + 1) > end)
        return XDP_PASS;
    if (mlt_xdp_config.data_port == 0 || udp->dest != bpf_htons(mlt_xdp_config.data_port))
        return XDP_PASS;
    /* No socket on this queue: the kernel has it (XDP_PASS in the flags' low bits). */
    return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

/* The project's licence; the program uses no GPL-only helper. */
char LICENSE[] SEC("license") = "Apache-2.0";
