#!/usr/bin/env python3
"""Analysis helper of bench/reaction (not run on its own): reads a pcap written by tcpdump
with nanosecond timestamps on a passive veth end, and prints per-event figures as JSON.

  reaction_pcap.py rp PCAP PRIO PAUSE_MS  PFC XOFFs injected on this wire vs the data that
                                       kept coming: per XOFF, time and frames until the last
                                       data frame inside the pause
  reaction_pcap.py cp PCAP PRIO SIZE   PFC sent by a congestion point vs the data its peer sent:
                                       per XOFF event, bytes and time until XON (overshoot)
  reaction_pcap.py sfc PCAP PRIO       SFC messages vs the data the source sent: per SFCM
                                       that found the source sending, the time until its last
                                       frame before the pause
Data frames are the test traffic of lossless gen (UDP payload starting with "LSLT").
"""
import json
import struct
import sys

PFC, EXP = 0x8808, 0x88B5


def read(path):
    """[(t_ns, kind, info)]: kind 'pfc' (info = time of PRIO or None if not enabled),
    'sfcm' (info = pause interval ns), 'data' (info = frame length)."""
    with open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack_from("<I", raw, 0)[0]
    if magic == 0xA1B23C4D:
        end, scale = "<", 1
    elif magic == 0xA1B2C3D4:
        end, scale = "<", 1000
    else:
        sys.exit(f"{path}: not a little-endian pcap")
    off, out = 24, []
    while off + 16 <= len(raw):
        sec, frac, incl, orig = struct.unpack_from(end + "IIII", raw, off)
        off += 16
        pkt = raw[off : off + incl]
        off += incl
        t = sec * 1_000_000_000 + frac * scale
        if len(pkt) < 14:
            continue
        et = struct.unpack_from(">H", pkt, 12)[0]
        body = 14
        if et == 0x8100 and len(pkt) >= 18:
            et = struct.unpack_from(">H", pkt, 16)[0]
            body = 18
        if et == PFC:
            op = struct.unpack_from(">H", pkt, body)[0]
            if op == 0x0101:
                ev = struct.unpack_from(">H", pkt, body + 2)[0]
                prio_time = struct.unpack_from(">8H", pkt, body + 4)
                out.append((t, "pfc", prio_time if ev else None, ev))
            elif op == 0x0001:
                q = struct.unpack_from(">H", pkt, body + 2)[0]
                out.append((t, "pfc", (q,) * 8, 0xFF))
            continue
        if et == EXP:
            if len(pkt) >= body + 16 and pkt[body + 1] == 0x01:
                pi = struct.unpack_from(">Q", pkt, body + 8)[0]
                out.append((t, "sfcm", pi, pkt[body + 3]))
            continue
        # Test traffic only: the payload's magic "LSLT" after IPv4 and UDP (the kernel's own
        # frames on these veths, IPv6 router solicitations and the like, are not data).
        if pkt[body + 28 : body + 32] == b"LSLT":
            out.append((t, "data", orig, None))
    out.sort(key=lambda x: x[0])
    return out


def dist(xs):
    xs = sorted(xs)
    if not xs:
        return None
    q = lambda p: xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
    return {"n": len(xs), "min": xs[0], "median": q(0.5), "p99": q(0.99), "max": xs[-1]}


def pfc_time(ev, prio):
    _, _, times, enable = ev
    if times is None or not (enable >> prio) & 1:
        return None
    return times[prio]


def rp(path, prio, pause_ns):
    """Per injected XOFF at t0: the data frames seen in (t0, t0 + 0.9 * pause), i.e. sent
    although the XOFF was on the wire (a paused reaction point sends none after it has
    reacted, and resumes only when the pause expires). Reaction time = the last of them - t0
    (0 when there is none). idle_us = how long before t0 the stream's last frame was: the
    XOFF arriving between two bursts of a paced stream leaves nothing to stop."""
    import bisect

    evs = read(path)
    data = [e[0] for e in evs if e[1] == "data"]
    xoffs = [e[0] for e in evs if e[1] == "pfc" and (pfc_time(e, prio) or 0) > 0]
    us, frames, idle, late, skipped = [], [], [], [], 0
    for t0 in xoffs:
        j = bisect.bisect_left(data, t0) - 1
        if j < 0 or t0 - data[j] > 5_000_000:
            skipped += 1  # the stream was not flowing (before the start, or paused)
            continue
        i = bisect.bisect_right(data, t0)
        k = bisect.bisect_right(data, t0 + pause_ns * 9 // 10)
        if k >= len(data):
            skipped += 1  # the stream ended inside the pause
            continue
        last = data[k - 1] if k > i else t0
        us.append((last - t0) / 1000)
        frames.append(k - i)
        idle.append((t0 - data[j]) / 1000)
        # frames sent more than 1 ms after the XOFF: not a slow reaction but a leak
        late.append(sum(1 for t in data[i:k] if t - t0 > 1_000_000))
    return {
        "xoffs": len(xoffs),
        "measured": len(us),
        "skipped": skipped,
        "data_frames": len(data),
        "reaction_us": dist(us),
        "reaction_frames": dist(frames),
        "idle_before_us": dist(idle),
        "late_frames": sum(late),
        "events_with_late_frames": sum(1 for x in late if x),
    }


def cp(path, prio, size):
    """Per XOFF event (an XOFF after an XON, or the first): data frames the peer sent after
    the XOFF and before the next XON (none, once the peer has paused)."""
    evs = read(path)
    events, state, t_xoff = [], "on", None
    cur = None
    for e in evs:
        if e[1] == "pfc":
            q = pfc_time(e, prio)
            if q is None:
                continue
            if q > 0 and state == "on":
                state, cur = "off", {"t": e[0], "n": 0, "last": e[0]}
            elif q == 0 and state == "off":
                state = "on"
                events.append(cur)
                cur = None
        elif e[1] == "data" and cur is not None:
            cur["n"] += 1
            cur["last"] = e[0]
    pfcs = sum(1 for e in evs if e[1] == "pfc")
    return {
        "pfc_frames": pfcs,
        "xoff_events": len(events),
        "overshoot_bytes": dist([c["n"] * size for c in events]),
        "overshoot_frames": dist([c["n"] for c in events]),
        "reaction_us": dist([(c["last"] - c["t"]) / 1000 for c in events]),
    }


def sfc(path, prio, active_ns):
    """Per SFCM at t0 with pause PI, sent while the source was sending (a data frame within
    active_ns before t0): the last data frame in (t0, t0 + PI/2) is when the source stopped."""
    import bisect

    evs = read(path)
    data = [e[0] for e in evs if e[1] == "data"]
    msgs = [(e[0], e[2]) for e in evs if e[1] == "sfcm" and e[3] == prio]
    us, frames, pis, skipped = [], [], [], 0
    for t0, pi in msgs:
        j = bisect.bisect_left(data, t0) - 1
        if j < 0 or t0 - data[j] > active_ns or pi < 4 * active_ns:
            skipped += 1
            continue
        k = bisect.bisect_right(data, t0 + pi // 2)
        i = bisect.bisect_right(data, t0)
        last = data[k - 1] if k > i else t0
        us.append((last - t0) / 1000)
        frames.append(k - i)
        pis.append(pi / 1000)
    return {
        "sfcms": len(msgs),
        "measured": len(us),
        "skipped": skipped,
        "reaction_us": dist(us),
        "reaction_frames": dist(frames),
        "pause_interval_us": dist(pis),
    }


if __name__ == "__main__":
    what, path, prio = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "rp":
        r = rp(path, prio, int(float(sys.argv[4]) * 1e6))
    elif what == "cp":
        r = cp(path, prio, int(sys.argv[4]))
    elif what == "sfc":
        r = sfc(path, prio, 200_000)
    else:
        sys.exit(f"unknown analysis {what}")
    print(json.dumps(r))
