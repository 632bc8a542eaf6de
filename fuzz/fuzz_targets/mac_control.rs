//! 802.3x PAUSE and 802.1Qbb PFC: parse a frame, emit it, re-parse; the opcode and the times
//! must come back bit for bit (all but PFC's reserved upper octet of the vector, emitted 0).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::{EthernetFrame, MacControl, MIN_FRAME_LEN};

fuzz_target!(|data: &[u8]| {
    // The payload parser on its own (the bytes after the EtherType) must never panic either.
    let _ = MacControl::parse(data);
    let Ok(m) = MacControl::parse_frame(data) else {
        return;
    };
    let eth = EthernetFrame::new_checked(data).unwrap();
    let mut buf = [0xa5u8; 64];
    let n = m
        .emit_frame(eth.src(), &mut buf)
        .expect("a parsed frame must emit");
    assert_eq!(n, MIN_FRAME_LEN);
    assert_eq!(MacControl::parse_frame(&buf[..n]).unwrap(), m);
    let used = match m {
        MacControl::Pause { .. } => 4,
        MacControl::Pfc { .. } => 20,
    };
    let mut sent = eth.payload()[..used].to_vec();
    if let MacControl::Pfc { .. } = m {
        sent[2] = 0; // reserved, ignored on receipt
    }
    assert_eq!(&buf[14..14 + used], &sent[..]);
    assert!(buf[14 + used..n].iter().all(|&b| b == 0), "padding is zero");
});
