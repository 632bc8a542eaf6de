//! Test traffic: parse a frame as the sink does, rebuild it with the generator's emit from the
//! decoded fields (and the input's addresses and ports), re-parse; the sink's view must be equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::ipv4::ipv4_checksum;
use lossless::wire::{EthernetRepr, TestFrame, TestFrameView};

fuzz_target!(|data: &[u8]| {
    let Ok(view) = TestFrameView::parse(data) else {
        return;
    };
    let eth = EthernetRepr::parse(data).unwrap();
    let l3 = eth.header_len();
    let ip = &data[l3..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let udp = &ip[ihl..];
    let ip4 = |at: usize| [ip[at], ip[at + 1], ip[at + 2], ip[at + 3]];
    let frame = TestFrame {
        eth,
        src_ip: ip4(12),
        dst_ip: ip4(16),
        dscp: ip[1] >> 2,
        src_port: u16::from_be_bytes([udp[0], udp[1]]),
        dst_port: view.dst_port,
        flow: view.flow,
        seq: view.seq,
        tx_ns: view.tx_ns,
        len: data
            .len()
            .clamp(TestFrame::min_len(eth.vlan.is_some()), 9216),
    };
    let mut buf = vec![0xa5u8; frame.len];
    let n = frame
        .emit(&mut buf)
        .expect("a frame rebuilt from a parsed one must emit");
    assert_eq!(n, frame.len);
    assert_eq!(TestFrameView::parse(&buf).unwrap(), view);
    assert_eq!(ipv4_checksum(&buf[l3..l3 + 20]), 0, "IPv4 header checksum");
    let total = usize::from(u16::from_be_bytes([buf[l3 + 2], buf[l3 + 3]]));
    assert_eq!(total, n - l3, "IPv4 total length");
});
