//! IEEE 1588 peer delay: parse a frame; a Pdelay_Req/Resp/Resp_Follow_Up must emit and re-parse
//! to the same message; any other well-formed PTP message must be reported as not ours.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::wire::ptp::{
    Ptp, MSG_PDELAY_REQ, MSG_PDELAY_RESP, MSG_PDELAY_RESP_FOLLOW_UP, PDELAY_LEN,
};

fuzz_target!(|data: &[u8]| {
    let Ok((src, ptp)) = Ptp::parse_frame(data) else {
        return;
    };
    match ptp {
        Ptp::NotOurs { message_type } => assert!(!matches!(
            message_type,
            MSG_PDELAY_REQ | MSG_PDELAY_RESP | MSG_PDELAY_RESP_FOLLOW_UP
        )),
        Ptp::Pdelay(m) => {
            let mut buf = [0u8; 128];
            let n = m
                .emit_frame(src, &mut buf)
                .unwrap_or_else(|e| panic!("a parsed peer-delay message must emit: {e}"));
            assert_eq!(n, 14 + PDELAY_LEN);
            let (src2, again) = Ptp::parse_frame(&buf[..n]).expect("emitted message parses");
            assert_eq!(src2, src);
            assert_eq!(again, Ptp::Pdelay(m));
        }
    }
});
