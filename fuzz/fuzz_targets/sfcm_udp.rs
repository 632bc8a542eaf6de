//! SFC message over UDP/IPv4: parse (destination port 0x88B5), emit, re-parse. Emit writes no
//! IPv4 options and its own checksums, so the decoded fields and the 64-byte body are compared.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::ipv4::ipv4_checksum;
use lossless::wire::sfcm::{SfcmUdpFrame, SFCM_LEN, SFCM_UDP_PORT};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = SfcmUdpFrame::parse(data, SFCM_UDP_PORT) else {
        return;
    };
    let mut buf = [0u8; 160];
    let n = frame
        .emit(&mut buf)
        .expect("a parsed UDP SFCM frame must emit");
    let l3 = frame.eth.header_len();
    assert_eq!(n, l3 + 20 + 8 + SFCM_LEN);
    assert_eq!(ipv4_checksum(&buf[l3..l3 + 20]), 0, "IPv4 header checksum");
    assert_eq!(
        SfcmUdpFrame::parse(&buf[..n], SFCM_UDP_PORT).unwrap(),
        frame
    );
    let ihl = usize::from(data[l3] & 0x0f) * 4;
    let body = l3 + ihl + 8;
    assert_eq!(
        &buf[n - SFCM_LEN..n],
        &data[body..body + SFCM_LEN],
        "body bytes differ"
    );
});
