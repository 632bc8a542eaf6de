// SPDX-License-Identifier: (MIT OR Apache-2.0)
/*
 * Benchmark reference only, never loaded by the daemon: the smallest useful XDP program.
 * It counts every frame in a per-CPU counter and drops it, which is the in-kernel ceiling
 * of receiving on an interface (bench/rx; loaded by the `lossless-bench` helper binary).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Frames seen, per CPU (summed by the reader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drop_count SEC(".maps");

SEC("xdp")
int xdp_drop_count(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *c = bpf_map_lookup_elem(&drop_count, &zero);
	if (c)
		*c += 1;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
