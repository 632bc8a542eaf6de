// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * XDP steering program of the lossless daemon.
 *
 * Redirects the frames the daemon owns into the AF_XDP socket bound to the
 * frame's RX queue (XSKMAP keyed by RX queue index) and passes everything
 * else to the kernel (ARP, SSH, ...). On a forwarding port every frame is
 * owned. Each redirected frame gets an RX timestamp (bpf_ktime_get_ns(),
 * CLOCK_MONOTONIC) in the XDP metadata area right before the packet data, so
 * the stamp is taken before the socket ring and the worker's wake-up.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_MAC_CONTROL 0x8808 /* 802.3x PAUSE and 802.1Qbb PFC */
#define ETH_P_PTP 0x88F7         /* IEEE 1588 peer delay */
#define ETH_P_LLDP_ 0x88CC       /* LLDP capability exchange */
#define ETH_P_LOSSLESS 0x88B5    /* our SFC and credit messages */
#define ETH_P_VLAN 0x8100
#define ETH_P_QINQ 0x88A8

/* Mirrors `dataplane::xdp::PortSettings` in the daemon. */
struct port_settings {
	__u32 forward_all;   /* 1: every frame belongs to the daemon */
	__u16 test_udp_port; /* UDP destination port of test traffic (host order), 0 = none */
	__u16 sfc_udp_port;  /* UDP destination port of SFC messages (host order), 0 = none */
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_settings);
} settings SEC(".maps");

/* Per-CPU counters: 0 redirected, 1 passed, 2 redirect failed (no socket). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;
}

static __always_inline int owned(void *data, void *data_end, const struct port_settings *s)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return 0;
	__u16 proto = bpf_ntohs(eth->h_proto);
	void *l3 = eth + 1;
	if (proto == ETH_P_VLAN || proto == ETH_P_QINQ) {
		/* one tag: TCI then the inner EtherType */
		if (l3 + 4 > data_end)
			return 0;
		proto = bpf_ntohs(*(__be16 *)(l3 + 2));
		l3 += 4;
	}
	switch (proto) {
	case ETH_P_MAC_CONTROL:
	case ETH_P_PTP:
	case ETH_P_LLDP_:
	case ETH_P_LOSSLESS:
		return 1;
	case ETH_P_IP:
		break;
	default:
		return 0;
	}
	struct iphdr *ip = l3;
	if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_UDP || ip->ihl < 5)
		return 0;
	struct udphdr *udp = l3 + ip->ihl * 4;
	if ((void *)(udp + 1) > data_end)
		return 0;
	__u16 dport = bpf_ntohs(udp->dest);
	return (s->test_udp_port && dport == s->test_udp_port) ||
	       (s->sfc_udp_port && dport == s->sfc_udp_port);
}

SEC("xdp")
int lossless_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct port_settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s)
		return XDP_PASS;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (!s->forward_all && !owned(data, data_end, s)) {
		count(1);
		return XDP_PASS;
	}
	/* RX timestamp into the metadata area; best effort (not every driver has room). */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
		__u64 *meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) <= (void *)(long)ctx->data)
			*meta = bpf_ktime_get_ns();
	}
	int rc = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	count(rc == XDP_REDIRECT ? 0 : 2);
	return rc;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
