//! Ethernet II / 802.1Q header: parse, emit, re-parse; the emitted header must equal the input
//! byte for byte, except that an 802.1ad TPID (0x88A8) is re-emitted as 0x8100. The frame
//! classifier agrees with the parser: a runt exactly when the header does not parse, else the
//! same EtherType and header length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::{classify, EtherType, EthernetFrame, EthernetRepr, FrameKind};

fuzz_target!(|data: &[u8]| {
    let class = classify(data);
    let Ok(repr) = EthernetRepr::parse(data) else {
        assert_eq!(class.kind, FrameKind::Runt);
        assert!(class.eth(data).is_none());
        return;
    };
    let view = EthernetFrame::new_checked(data).expect("parse succeeded, so the view must");
    assert_eq!(view.header_len(), repr.header_len());
    assert_ne!(class.kind, FrameKind::Runt);
    assert_eq!(
        (class.ethertype, class.header_len),
        (repr.ethertype, repr.header_len())
    );
    let again = class.eth(data).expect("not a runt");
    assert_eq!(
        (again.ethertype(), again.header_len()),
        (view.ethertype(), view.header_len())
    );
    let mut buf = [0u8; 18];
    let n = repr.emit(&mut buf).expect("a parsed header must emit");
    assert_eq!(n, repr.header_len());
    assert_eq!(EthernetRepr::parse(&buf[..n]).unwrap(), repr);
    let mut expected = data[..n].to_vec();
    if n == 18 && expected[12..14] == EtherType::QINQ.to_be_bytes() {
        expected[12..14].copy_from_slice(&EtherType::VLAN.to_be_bytes());
    }
    assert_eq!(
        &buf[..n],
        &expected[..],
        "header bytes differ after the round trip"
    );
});
