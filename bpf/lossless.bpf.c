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
 * frame also carries, in the XDP metadata area in front of its data (decoded by
 * `dataplane::rx_meta`):
 *
 *   data - 24  u64  the queue's steered-frames counter after this frame
 *   data - 16  u64  bit 63 set (valid), priority in bits 60..62, the
 *                   priority's steered-bytes counter after this frame
 *   data -  8  u64  RX timestamp: bit 63 clear, bpf_ktime_get_ns()
 *                   (CLOCK_MONOTONIC); bit 63 set, the NIC's hardware stamp
 *                   (its PHC's clock) in bits 0..62
 *
 * except on a sampled port (`sampled` in the settings: a forwarding port none
 * of whose priorities is lossless, so nothing reads its counters). There the
 * program counts nothing per priority, reads a frame only as far as its
 * EtherType, and writes the metadata (no ingress stamps, a timestamp taken at
 * the end) for control frames and one data frame in SAMPLE_EVERY only; the
 * others get none. The accounting and the clock read were about two thirds of
 * the program's cost per frame, paid on the CPU that receives (on veth, the
 * sender's): bench/RESULTS.md.
 *
 * The program comes in two variants of one body. `lossless_xdp` runs
 * anywhere. `lossless_xdp_dev` is loaded device-bound (prog_ifindex +
 * BPF_F_XDP_DEV_BOUND_ONLY, one copy per port) and asks the driver, through
 * the XDP RX metadata kfuncs, for
 * - the frame's hardware RX stamp (bpf_xdp_metadata_rx_timestamp: mlx5, ice,
 *   igc, ... when the port's RX hardware stamping is on; veth passes the skb's
 *   hardware stamp, none on a plain veth), asked only where the daemon turned
 *   that stamping on and knows the PHC to convert from (`hw_stamps`): it would
 *   throw any other away. Without one (not asked, kfunc missing, error, or 0)
 *   the frame gets the bpf_ktime_get_ns() stamp, per frame;
 * - the VLAN tag the driver stripped or the sender's stack kept as skb
 *   metadata (bpf_xdp_metadata_rx_vlan_tag, kernel 6.8+; rx-vlan offload on a
 *   NIC, tx-vlan offload behind a veth). The frame's priority is then that
 *   tag's PCP, and a frame steered to a socket gets the tag put back in front
 *   of its EtherType (bpf_xdp_adjust_head): the worker classifies the frame
 *   by the same tag with the same rule, and forwards it with its tag.
 *
 * Size budget of `lossless_xdp_dev`: 435 instructions submitted, 463 after
 * the verifier's rewrites (bpftool's xlated size / 8), of the 503 one page
 * holds. A device-bound program the verifier grows past the pages it was
 * loaded in trips a 6.18 kernel bug (a stale pointer in its offload record: an
 * oops with RTNL held when the interface is removed), so the loader refuses it
 * and falls back to `lossless_xdp` (`dataplane::xdp_prog`). Adding to this file
 * means finding the instructions elsewhere (the stall guard's doorbell, 42
 * instructions, was paid for by looking the counters up once per frame instead
 * of once per counter), submitting more than a page's worth, or dropping
 * device-bound loading.
 *
 * The stall guard's doorbell (`bell`, below): the worker counts its receive
 * turns per queue into `turns`; the program notes when it last saw them move
 * (or the queue empty), and when frames keep arriving `bell_ns` after that it
 * writes a record into the guards' ring buffers, which wakes them
 * (`dataplane::stall_guard`).
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
	__u8 sampled;        /* 1: a forwarding port without a lossless priority (see steer) */
	__u8 hw_stamps;      /* 1: RX hardware stamping is on and the daemon has its PHC */
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
	__u64 bell_turns;     /* the doorbell's: `turns` as last seen moving (this program) */
	__u64 bell_since;     /* when it was seen moving, or the queue empty (this program) */
	__u64 bell_frames;    /* `frames` then (this program) */
	__u64 bell_rung;      /* when the bell last rang (this program) */
	__u64 reserved1[3];
	__u64 lossy_drops[8]; /* lossy frames dropped for a deep backlog (this program) */
	__u64 seen_frames;    /* frames stamp of the last frame the worker took (the worker) */
	__u64 turns;          /* the worker's receive turns on this queue (the worker) */
	__u64 bell_ns;        /* ring after this long without a turn; 0 = never (the guard) */
	__u64 fill_free;      /* fill-ring buffers left at the worker's last turn (the worker) */
	__u64 fill_frames;    /* `frames` then (the worker) */
	__u64 fill_bytes;     /* the sum of `bytes` then (the worker) */
	__u64 fill_target;    /* buffers the worker keeps in the fill ring (the worker) */
	__u64 fill_chunk;     /* frame bytes per buffer; 0 = one buffer a frame (the worker) */
	__u64 oversize[8];    /* frames over max_frame dropped, per priority (this program) */
};

/*
 * The stall guard's doorbells (`dataplane::stall_guard`), one per guard thread: a record in
 * each wakes the guards when frames keep arriving for a queue whose worker has made no receive
 * turn for `bell_ns` while frames waited. The guard reads the queue's bell_* fields; the
 * record says who sent the frame that rang (`struct bell_record`), a source the guard may have
 * to pause with SFC before the worker has taken any of its frames.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} bell0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} bell1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct ingress_queue);
} ingress SEC(".maps");

/*
 * Per-CPU counters (mirrored by `XdpCounters` in the daemon), one entry: 0 redirected,
 * 1 passed, 2 redirect failed (no socket); of the redirected frames (device-bound variant
 * only): 3 stamped in hardware, 4 stamp kfunc returned an error, 5 stamp kfunc returned 0 as
 * the stamp, 6 VLAN tag taken from the metadata and put back into the frame. One entry, looked
 * up once per frame: a lookup per counter cost the device-bound program 40 instructions of
 * its one-page budget (see the top of this file).
 */
#define CNT_REDIRECTED 0
#define CNT_PASSED 1
#define CNT_REDIRECT_FAILED 2
#define CNT_HW_STAMP 3
#define CNT_STAMP_ERROR 4
#define CNT_STAMP_ZERO 5
#define CNT_META_VLAN 6
#define CNT_NO_META 7
#define CNT_LEN 8
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[CNT_LEN]);
} counters SEC(".maps");

/* The XDP RX metadata kfuncs (weak: a kernel without them still loads the program). */
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym __weak;
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym __weak;

/* A plain load the compiler may not merge or repeat (the worker writes seen_frames). */
#define READ_ONCE_U64(x) (*(volatile __u64 *)&(x))

/*
 * Mirrors `dataplane::doorbell::BellRecord`: 64 bytes. The frame's first bytes, copied by
 * one helper call, hold its source (Ethernet, and IPv4 after at most one tag), which the guard
 * parses: parsing them here cost the device-bound program the rest of its page.
 */
#define BELL_HEAD 48
struct bell_record {
	__u64 now;            /* when it rang */
	__u32 queue;          /* the RX queue */
	__u8 prio;            /* the frame's priority */
	__u8 head_valid;      /* 1: head holds the frame's first BELL_HEAD bytes */
	__u8 reserved[2];
	__u8 head[BELL_HEAD]; /* the frame's first bytes */
};

/*
 * The doorbell, for a frame `ctx` of priority `prio` steered to `q` (RX queue `queue`) at
 * `now`, `frames` its frames stamp. The worker's receive turns count as movement, and so does
 * an empty queue before this frame (an idle worker asleep is woken by this very frame). Once
 * they have not moved for `bell_ns` and a frame still arrives, the bell rings, at most once per
 * `bell_ns` per queue, with this frame's first bytes (its source) in the record.
 */
static __always_inline void bell(struct xdp_md *ctx, struct ingress_queue *q, __u32 queue,
				 __u32 prio, __u64 frames, __u64 now)
{
	__u64 ns = READ_ONCE_U64(q->bell_ns);
	if (!ns)
		return;
	__u64 turns = READ_ONCE_U64(q->turns);
	if (turns != q->bell_turns || frames - 1 <= READ_ONCE_U64(q->seen_frames)) {
		q->bell_turns = turns;
		q->bell_since = now;
		q->bell_frames = frames;
		return;
	}
	if (now - q->bell_since < ns || now - q->bell_rung < ns)
		return;
	q->bell_rung = now;
	/* Field by field: an initializer would zero the head first, instructions the page has no
	 * room for; the helper writes every byte of it (zeros where it fails). */
	struct bell_record r;
	r.now = now;
	r.queue = queue;
	r.prio = prio;
	r.head_valid = bpf_xdp_load_bytes(ctx, 0, r.head, BELL_HEAD) == 0;
	r.reserved[0] = 0;
	r.reserved[1] = 0;
	bpf_ringbuf_output(&bell0, &r, sizeof(r), BPF_RB_FORCE_WAKEUP);
	bpf_ringbuf_output(&bell1, &r, sizeof(r), BPF_RB_FORCE_WAKEUP);
}

static __always_inline void count(__u64 *counters, __u32 idx)
{
	if (counters)
		counters[idx] += 1;
}

/* A sampled port stamps one data frame in this many (a power of two). */
#define SAMPLE_EVERY 64

/* What the program needs to know of a frame, from one pass over its headers. */
struct parsed {
	__u16 proto; /* EtherType after at most one VLAN tag */
	__u8 prio;   /* priority under the port's trust mode, by the frame's bytes */
	__u8 owned;  /* a tool's port: the frame is the daemon's */
};

static __always_inline int is_control(__u16 proto)
{
	return proto == ETH_P_MAC_CONTROL || proto == ETH_P_PTP || proto == ETH_P_LLDP_ ||
	       proto == ETH_P_LOSSLESS;
}

/*
 * The frame's bytes only: a tag the driver holds as metadata is the caller's to weigh.
 * `l2_only`: stop after the EtherType (the priority is then the PCP's even where the port
 * trusts DSCP, and a test or SFC frame is not seen).
 */
static __always_inline int parse(void *data, void *data_end, const struct port_settings *s,
				 int l2_only, struct parsed *out)
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
	if (l2_only || proto != ETH_P_IP)
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
#define STAMP_HARDWARE (1ULL << 63)

/*
 * Puts a tag the driver held as metadata back into the frame, after the addresses. Returns 0,
 * or -1 (frame unchanged) when the driver leaves no headroom for it.
 */
static __always_inline int push_vlan(struct xdp_md *ctx, __u16 tpid, __u16 tci)
{
	if ((void *)(long)ctx->data + 12 > (void *)(long)ctx->data_end)
		return -1;
	if (bpf_xdp_adjust_head(ctx, -4))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 16 > data_end)
		return -1; /* cannot happen (checked above); the verifier wants it */
	__u8 macs[12];
	__builtin_memcpy(macs, data + 4, 12);
	__builtin_memcpy(data, macs, 12);
	*(__be16 *)(data + 12) = bpf_htons(tpid);
	*(__be16 *)(data + 14) = bpf_htons(tci);
	return 0;
}
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
static __always_inline int steer(struct xdp_md *ctx, const int dev_bound)
{
	__u32 zero = 0;
	struct port_settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (!s)
		return XDP_PASS;
	/* A sampled port (see the top of this file): no counters, the EtherType only unless the
	 * frame may be oversize, a stamp at the end on control frames and one in SAMPLE_EVERY. */
	const int sampled = s->forward_all && s->sampled;
	/* The arrival time first, before any parsing or kfunc call delays it. */
	__u64 arrival = sampled ? 0 : bpf_ktime_get_ns();
	__u64 *cnt = bpf_map_lookup_elem(&counters, &zero);
	int meta_tci = -1;
	__u16 vlan_proto = 0;
	if (dev_bound && bpf_ksym_exists(bpf_xdp_metadata_rx_vlan_tag)) {
		__be16 proto = 0;
		__u16 tci = 0;
		if (bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci) == 0) {
			meta_tci = tci;
			vlan_proto = bpf_ntohs(proto);
		}
	}
	/* The whole frame's length; a tag put back below adds its 4 bytes. */
	__u32 len = bpf_xdp_get_buff_len(ctx);
	struct parsed f;
	parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, s,
	      sampled && !(s->max_frame && len + 4 > s->max_frame), &f);
	if (!s->forward_all && !f.owned) {
		count(cnt, CNT_PASSED);
		return XDP_PASS;
	}
	__u32 queue = ctx->rx_queue_index;
	/* A tag held as metadata goes back into a frame that goes to a socket (not one the
	 * kernel gets: its skb still holds the tag). Put back before anything measures the
	 * frame: the socket receives it 4 bytes longer. Without headroom for it, the frame
	 * goes as it is, classified as it is, so the worker sees what the program counted. */
	if (meta_tci >= 0 && bpf_map_lookup_elem(&xsks, &queue)) {
		if (push_vlan(ctx, vlan_proto, meta_tci) == 0) {
			count(cnt, CNT_META_VLAN);
			len += 4;
		} else {
			meta_tci = -1;
		}
	}
	/* A tag held as metadata is the frame's outer tag (the one taken off first), so where
	 * the port classifies by PCP, the tag's PCP is the priority, as the worker's classifier
	 * sees it once the tag is back in the frame. The mask after a compiler barrier: the
	 * compiler knows the value is below 8 and would drop a plain mask, leaving the verifier
	 * an index it cannot bound. */
	__u32 prio = meta_tci >= 0 && !s->trust_dscp ? meta_tci >> 13 : f.prio;
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
	const int stamped = !sampled || is_control(f.proto) ||
			    (cnt && (cnt[CNT_REDIRECTED] & (SAMPLE_EVERY - 1)) == 0);
	/* Room for the stamps; not every driver has a metadata area. A frame without it is not
	 * counted into the backlog either: the worker could never take it off again (it would
	 * stand as backlog until the ring is seen empty), and it is counted as such instead. */
	const int has_meta = stamped && bpf_xdp_adjust_meta(ctx, -(int)(3 * sizeof(__u64))) == 0;
	int rc = bpf_redirect_map(&xsks, queue, XDP_PASS);
	if (rc != XDP_REDIRECT) {
		count(cnt, CNT_REDIRECT_FAILED);
		return rc;
	}
	count(cnt, CNT_REDIRECTED);
	if (!stamped)
		return rc;
	if (!has_meta) {
		count(cnt, CNT_NO_META);
		return rc;
	}
	__u64 frames = 0, bytes = 0;
	if (q && !sampled) {
		bytes = STAMP_VALID | ((__u64)prio << STAMP_PRIO_SHIFT) |
			((__sync_fetch_and_add(&q->bytes[prio], len) + len) & STAMP_BYTES_MASK);
		frames = __sync_fetch_and_add(&q->frames, 1) + 1;
		bell(ctx, q, queue, prio, frames, arrival);
	}
	__u64 stamp = 0;
	if (dev_bound && s->hw_stamps && bpf_ksym_exists(bpf_xdp_metadata_rx_timestamp)) {
		if (bpf_xdp_metadata_rx_timestamp(ctx, &stamp) != 0) {
			stamp = 0;
			count(cnt, CNT_STAMP_ERROR);
		} else if (stamp == 0) {
			count(cnt, CNT_STAMP_ZERO);
		} else {
			stamp |= STAMP_HARDWARE; /* a PHC time is far below 2^63 ns */
			count(cnt, CNT_HW_STAMP);
		}
	}
	if (!stamp)
		stamp = sampled ? bpf_ktime_get_ns() : arrival;
	__u64 *meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 3) <= (void *)(long)ctx->data) {
		meta[0] = frames;
		meta[1] = bytes;
		meta[2] = stamp;
	}
	return rc;
}

/* The program for any interface and mode. */
SEC("xdp.frags")
int lossless_xdp(struct xdp_md *ctx)
{
	return steer(ctx, 0);
}

/*
 * The device-bound variant: loaded with prog_ifindex and BPF_F_XDP_DEV_BOUND_ONLY for one
 * port (the kernel refuses the metadata kfuncs in any other program), attached natively only.
 */
SEC("xdp.frags")
int lossless_xdp_dev(struct xdp_md *ctx)
{
	return steer(ctx, 1);
}


char LICENSE[] SEC("license") = "Dual MIT/GPL";
