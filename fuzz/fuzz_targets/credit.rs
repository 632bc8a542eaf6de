//! Credit update (EtherType 0x88B5, message type 2): parse, emit, re-parse; the header and
//! every entry (with its LPCRC) must come back byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::{CreditUpdate, EthernetFrame};

fuzz_target!(|data: &[u8]| {
    let _ = CreditUpdate::parse(data);
    let Ok(update) = CreditUpdate::parse_frame(data) else {
        return;
    };
    let eth = EthernetFrame::new_checked(data).unwrap();
    let mut buf = [0u8; 160];
    let n = update
        .emit_frame(eth.dst(), eth.src(), &mut buf)
        .expect("a parsed credit update must emit");
    assert_eq!(n, update.frame_len());
    assert_eq!(CreditUpdate::parse_frame(&buf[..n]).unwrap(), update);
    let len = update.payload_len();
    assert_eq!(
        &buf[14..14 + len],
        &eth.payload()[..len],
        "payload bytes differ"
    );
});
