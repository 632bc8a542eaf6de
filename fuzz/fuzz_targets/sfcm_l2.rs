//! SFC message over layer 2 (EtherType 0x88B5): parse, emit, re-parse. The codec promises that
//! every accepted body re-emits to the same 64 bytes, so the body is compared byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::sfcm::{Sfcm, SfcmFrame, SFCM_LEN};

fuzz_target!(|data: &[u8]| {
    // The body parser on its own must never panic either.
    let _ = Sfcm::parse(data);
    let Ok(frame) = SfcmFrame::parse(data) else {
        return;
    };
    let hl = frame.eth.header_len();
    let mut buf = [0u8; 128];
    let n = frame.emit(&mut buf).expect("a parsed SFCM frame must emit");
    assert_eq!(n, hl + SFCM_LEN);
    assert_eq!(SfcmFrame::parse(&buf[..n]).unwrap(), frame);
    assert_eq!(&buf[hl..n], &data[hl..hl + SFCM_LEN], "body bytes differ");
});
