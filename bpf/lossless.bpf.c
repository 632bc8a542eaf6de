// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * XDP steering program of the lossless daemon.
 *
 * Redirects the frames the daemon owns into the AF_XDP socket bound to the
 * frame's RX queue (XSKMAP keyed by RX queue index) and passes everything
 * else to the kernel (ARP, SSH, ...). On a forwarding port every frame is
 * owned.
 *
 * Ingress accounting starts here, not when a worker gets round to a frame: a
 * switch charges a frame to its ingress port and priority the moment it
 * arrives, and the RX ring is a queue like any other. For every frame it
 * steers, the program classifies the priority (the rule of
 * `dataplane::classify`: 802.1Q PCP, or IPv4 DSCP >> 3 when the port trusts
 * DSCP) and adds the frame to per-(RX queue, priority) counters in the
 * mmapable `ingress` array, which the worker reads with plain loads. Each
 * frame also carries, in the XDP metadata area in front of its data:
 *
 *   data - 24  u64  the queue's steered-frames counter after this frame
 *   data - 16  u64  bit 63 set (valid), priority in bits 60..62, the
 *                   priority's steered-bytes counter after this frame
 *   data -  8  u64  RX timestamp, bpf_ktime_get_ns() (CLOCK_MONOTONIC)
 *
 * A worker taking a frame from the RX ring knows from its stamps that every
 * frame steered before it has been taken or dropped by the kernel, so
 * "steered - stamp of the last frame taken" is the backlog still waiting in
 * the ring, exact even when the kernel drops frames (no drift).
 *
 * The worker writes the frames stamp of the last frame it took into
 * `seen_frames`; with that the program sees the ring's depth in frames and
 * drops frames of lossy priorities (never control frames, never lossless
 * priorities) once it exceeds `lossy_backlog_frames`, counted per priority,
 * so a lossy flood cannot take the buffers the lossless priorities' headroom
 * needs.
 *
 * A frame longer than `max_frame` (the port's configured maximum, never more
 * than the port's AF_XDP sockets take: one 2 KiB buffer, or 9,216 bytes across
 * several for a multi-buffer socket) is dropped here and counted per priority in
 * `oversize`: redirected, the kernel would drop it at the socket with nothing
 * but a per-socket `rx_dropped` to show for it.
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

/* Mirrors `XdpProgram::write_settings` in the daemon (`dataplane::xdp_prog`). */
struct port_settings {
	__u32 forward_all;   /* 1: every frame belongs to the daemon */
	__u16 test_udp_port; /* UDP destination port of test traffic (host order), 0 = none */
	__u16 sfc_udp_port;  /* UDP destination port of SFC messages (host order), 0 = none */
	__u8 trust_dscp;     /* 1: classify by IPv4 DSCP, else by 802.1Q PCP */
	__u8 lossy_mask;     /* priorities this program may drop when the backlog is deep */
	__u16 reserved;
	__u32 lossy_backlog_frames; /* backlog (frames) from which lossy frames drop; 0 = never */
	__u32 max_frame;            /* largest frame (bytes) the port takes; 0 = no limit */
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

/* Mirrors `dataplane::ingress::IngressQueue`: one per RX queue, 320 bytes. */
struct ingress_queue {
	__u64 bytes[8];       /* steered per priority, ever (this program) */
	__u64 frames;         /* steered, ever (this program) */
	__u64 reserved1[7];
	__u64 lossy_drops[8]; /* lossy frames dropped for a deep backlog (this program) */
	__u64 seen_frames;    /* frames stamp of the last frame the worker took (the worker) */
	__u64 reserved2[7];
	__u64 oversize[8];    /* frames over max_frame dropped, per priority (this program) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct ingress_queue);
} ingress SEC(".maps");

/* Per-CPU counters: 0 redirected, 1 passed, 2 redirect failed (no socket). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* A plain load the compiler may not merge or repeat (the worker writes seen_frames). */
#define READ_ONCE_U64(x) (*(volatile __u64 *)&(x))

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &idx);
	if (c)
		*c += 1;
}

/* What the program needs to know of a frame, from one pass over its headers. */
struct parsed {
	__u16 proto; /* EtherType after at most one VLAN tag */
	__u8 prio;   /* priority under the port's trust mode */
	__u8 owned;  /* a tool's port: the frame is the daemon's */
};

static __always_inline int is_control(__u16 proto)
{
	return proto == ETH_P_MAC_CONTROL || proto == ETH_P_PTP || proto == ETH_P_LLDP_ ||
	       proto == ETH_P_LOSSLESS;
}

static __always_inline int parse(void *data, void *data_end, const struct port_settings *s,
				 struct parsed *out)
{
	struct ethhdr *eth = data;
	out->proto = 0;
	out->prio = 0;
	out->owned = 0;
	if ((void *)(eth + 1) > data_end)
		return -1;
	__u16 proto = bpf_ntohs(eth->h_proto);
	void *l3 = eth + 1;
	if (proto == ETH_P_VLAN || proto == ETH_P_QINQ) {
		/* one tag: TCI then the inner EtherType */
		if (l3 + 4 > data_end)
			return -1;
		__u16 tci = bpf_ntohs(*(__be16 *)l3);
		if (!s->trust_dscp)
			out->prio = tci >> 13;
		proto = bpf_ntohs(*(__be16 *)(l3 + 2));
		l3 += 4;
	}
	out->proto = proto;
	if (is_control(proto)) {
		out->owned = 1;
		return 0;
	}
	if (proto != ETH_P_IP)
		return 0;
	struct iphdr *ip = l3;
	if ((void *)(ip + 1) > data_end)
		return 0;
	if (s->trust_dscp && ip->version == 4)
		out->prio = ip->tos >> 5;
	if (ip->protocol != IPPROTO_UDP || ip->ihl < 5)
		return 0;
	struct udphdr *udp = l3 + ip->ihl * 4;
	if ((void *)(udp + 1) > data_end)
		return 0;
	__u16 dport = bpf_ntohs(udp->dest);
	out->owned = (s->test_udp_port && dport == s->test_udp_port) ||
		     (s->sfc_udp_port && dport == s->sfc_udp_port);
	return 0;
}

#define STAMP_VALID (1ULL << 63)
#define STAMP_PRIO_SHIFT 60
#define STAMP_BYTES_MASK ((1ULL << STAMP_PRIO_SHIFT) - 1)

/*
 * Fragment-aware ("xdp.frags"): a driver may hand the program a frame in several buffers, so
 * it attaches natively where the MTU is larger than a page (veth refuses a plain XDP program
 * at MTU 9000: "Peer MTU is too large to set XDP"). The headers are parsed from the first
 * buffer (data .. data_end); the frame's length is the whole frame's, bpf_xdp_get_buff_len().
 * A frame the program redirects is never longer than max_frame, which the socket takes: in one
 * UMEM buffer, or, for a multi-buffer (XDP_USE_SG) socket, in several descriptors chained with
 * XDP_PKT_CONTD. The metadata written here lands in front of the first.
 */
SEC("xdp.frags")
int lossless_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct port_settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s)
		return XDP_PASS;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct parsed f;
	parse(data, data_end, s, &f);
	if (!s->forward_all && !f.owned) {
		count(1);
		return XDP_PASS;
	}
	__u32 len = bpf_xdp_get_buff_len(ctx);
	__u32 queue = ctx->rx_queue_index;
	/* The mask after a compiler barrier: the compiler knows f.prio < 8 and would drop a plain
	 * mask, leaving the verifier an index it cannot bound. */
	__u32 prio = f.prio;
	asm volatile("" : "+r"(prio));
	prio &= 7;
	struct ingress_queue *q = bpf_map_lookup_elem(&ingress, &queue);
	/* Without an entry for the queue there is no socket either: the kernel gets the frame. */
	if (q && s->max_frame && len > s->max_frame) {
		__sync_fetch_and_add(&q->oversize[prio], 1);
		return XDP_DROP;
	}
	if (q && s->lossy_backlog_frames && (s->lossy_mask & (1 << prio)) && !is_control(f.proto)) {
		__u64 backlog = READ_ONCE_U64(q->frames) - READ_ONCE_U64(q->seen_frames);
		if (backlog >= s->lossy_backlog_frames) {
			__sync_fetch_and_add(&q->lossy_drops[prio], 1);
			return XDP_DROP;
		}
	}
	/* Room for the stamps; best effort (not every driver has a metadata area). */
	bpf_xdp_adjust_meta(ctx, -(int)(3 * sizeof(__u64)));
	int rc = bpf_redirect_map(&xsks, queue, XDP_PASS);
	if (rc != XDP_REDIRECT) {
		count(2);
		return rc;
	}
	count(0);
	__u64 frames = 0, bytes = 0;
	if (q) {
		bytes = STAMP_VALID | ((__u64)prio << STAMP_PRIO_SHIFT) |
			((__sync_fetch_and_add(&q->bytes[prio], len) + len) & STAMP_BYTES_MASK);
		frames = __sync_fetch_and_add(&q->frames, 1) + 1;
	}
	__u64 *meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 3) <= (void *)(long)ctx->data) {
		meta[0] = frames;
		meta[1] = bytes;
		meta[2] = bpf_ktime_get_ns();
	}
	return rc;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
