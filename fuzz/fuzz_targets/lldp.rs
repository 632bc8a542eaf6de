//! LLDP: parse an LLDPDU (our TLV at its default OUI and subtype), emit it, re-parse; the
//! decoded TLVs must be equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::lldp::{Lldpdu, OrgTlvId};

fuzz_target!(|data: &[u8]| {
    let ours = OrgTlvId::default();
    let Ok((src, pdu)) = Lldpdu::parse_frame(data, ours) else {
        return;
    };
    let mut buf = [0u8; 2048];
    let n = pdu
        .emit_frame(src, ours, &mut buf)
        .unwrap_or_else(|e| panic!("a parsed LLDPDU must emit: {e}; {pdu:?}"));
    let (src2, pdu2) = Lldpdu::parse_frame(&buf[..n], ours).expect("emitted LLDPDU parses");
    assert_eq!(src2, src);
    assert_eq!(pdu2, pdu);
});
