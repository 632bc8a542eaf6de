# Shared by bench/rx, bench/scale and bench/gen-cpu (sourced, not run): binaries, the 64-byte
# trafgen sender, counters, the daemon's config and memory. Every bench creates its own
# namespaces with unique names and removes them on exit.

command -v trafgen >/dev/null || { echo "trafgen missing: apt-get install netsniff-ng" >&2; exit 1; }
T=${CARGO_TARGET_DIR:-$PWD/target}
B=$T/release/lossless
BB=$T/release/lossless-bench
# cargo from rustup: scripts/setup installs it in ~/.cargo/bin, on PATH only in new login shells.
[[ ":$PATH:" == *":${HOME:-}/.cargo/bin:"* || ! -d "${HOME:-}/.cargo/bin" ]] || export PATH="${HOME:-}/.cargo/bin:$PATH"
[ -x "$B" ] && [ -x "$BB" ] || cargo build --release --bins
# Senders and receivers run at the highest CFS priority, so other work on the machine (builds,
# tests) takes less of their CPUs; figures stay noisy on a shared 2-vCPU VM all the same.
# With autogroup scheduling (the default), nice only ranks processes within their session,
# so the session's autogroup is raised too while the bench runs: raise_priority, which each
# bench calls once its exit trap is in place, and restore_priority (called from that trap).
HI="nice -n -20"
saved_autogroup_nice='' raised_autogroup=''
# autogroup_nice: the nice value of this session's autogroup ("" without autogroup).
autogroup_nice() { awk '{print $NF}' /proc/self/autogroup 2>/dev/null || true; }
raise_priority() {
    saved_autogroup_nice=$(autogroup_nice)
    # Already at -20 (another bench of this session raised it, or it was so): nothing to undo.
    [ -n "$saved_autogroup_nice" ] && [ "$saved_autogroup_nice" != -20 ] || return 0
    echo -20 2>/dev/null > /proc/self/autogroup && raised_autogroup=1 || true
}
# Puts back the value raise_priority found, unless someone changed it since (a bench running
# beside this one in the session that restored it already, say).
restore_priority() {
    [ -n "$raised_autogroup" ] || return 0
    raised_autogroup=
    [ "$(autogroup_nice)" = -20 ] || return 0
    echo "$saved_autogroup_nice" 2>/dev/null > /proc/self/autogroup || true
}

# trafgen_conf FILE SIZE: one frame of SIZE bytes (no FCS): broadcast Ethernet, 802.1Q
# (PCP 3), IPv4, UDP to the test port, zero fill. The same frame bench/gen sends.
trafgen_conf() {
    local size=$2
    {
        echo "{ 0xff,0xff,0xff,0xff,0xff,0xff, 0x02,0,0,0,0,1, 0x81,0x00, 0x60,0x00, 0x08,0x00,"
        echo "  0x45,0, c16($((size - 18))), 0,0, 0x40,0, 64, 17, csumip(18, 37), 198,18,0,1, 198,18,0,2,"
        echo "  c16(49152), c16(48879), c16($((size - 18 - 20))), 0,0,"
        echo "  fill(0x00, $((size - 46))) }"
    } > "$1"
}

# stat NS IFACE COUNTER: one of the interface's sysfs statistics.
stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }

# send NS IFACE CONF SECONDS CPUS: trafgen as fast as it can for SECONDS with CPUS processes,
# which trafgen pins to CPUs 0..CPUS-1. With trafgen's default qdisc bypass (its -q would take
# the qdisc path) a frame leaves on TX queue cpu % queues, and veth hands it to the peer's RX
# queue of the same index. Prints "frames seconds": frames the veth took (tx_packets) and the
# wall-clock window.
send() {
    local ns=$1 dev=$2 conf=$3 secs=$4 cpus=$5 before t0 t1
    before=$(stat "$ns" "$dev" tx_packets)
    t0=$(date +%s.%N)
    ip netns exec "$ns" $HI timeout "$secs" trafgen --dev "$dev" --conf "$conf" --cpus "$cpus" -Q \
        >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    echo "$(( $(stat "$ns" "$dev" tx_packets) - before )) $(python3 -c "print($t1 - $t0)")"
}

# wait_ready FILE: until a tool's log says it is ready (10 s at most).
wait_ready() {
    local i
    for i in $(seq 100); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "not ready: $(cat "$1")" >&2
    return 1
}

# daemon_conf FILE WORKERS CORES BUSY_POLL FRAMES TAG: wire mode between d0 and d1, no
# metrics listener and a private control socket, so parallel runs do not collide.
daemon_conf() {
    printf '[daemon]\nworkers = %s\ncores = [%s]\nbusy_poll = %s\nframes = %s\n' "$2" "$3" "$4" "$5" > "$1"
    printf '[metrics]\nlisten = ""\n[control]\nsocket = "/tmp/%s.sock"\n' "$6" >> "$1"
    printf '[[port]]\niface = "d0"\nspeed = "100Gbit"\n[[port]]\niface = "d1"\nspeed = "100Gbit"\n' >> "$1"
}

# stop_pid PID: TERM, up to 5 s for it to exit, then KILL. Only processes the bench started.
stop_pid() {
    local p=$1
    kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
}

# mem PID KEY: VmRSS or VmHWM of a process, MiB.
mem() { awk -v k="$2:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
