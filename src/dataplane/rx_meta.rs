//! What the XDP program (`bpf/lossless.bpf.c`) writes in front of a frame it steers to a
//! socket: the ingress stamps ([`super::ingress::Stamps`]) and the RX timestamp with its
//! clock domain.
//!
//! The three words, lowest address first ([`META_WORDS`]):
//!
//! | word | content |
//! |------|---------|
//! | 0 | the queue's steered-frames counter after this frame |
//! | 1 | bit 63: valid; priority in bits 60..62; the priority's steered-bytes counter |
//! | 2 | RX time: bit 63 clear, `bpf_ktime_get_ns()` (CLOCK_MONOTONIC); set, the NIC's hardware stamp (its PHC's clock) in bits 0..62 |

use super::ingress::Stamps;

/// 64-bit words the XDP program writes in front of a frame's data.
pub const META_WORDS: usize = 3;

const STAMP_HARDWARE: u64 = 1 << 63;

/// A frame's RX time as the program took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxStamp {
    /// No stamp (no metadata area, or nothing written).
    None,
    /// `bpf_ktime_get_ns()` on arrival in XDP: CLOCK_MONOTONIC, the dataplane's clock.
    Xdp(u64),
    /// The NIC's stamp, in its PHC's clock (convert with [`super::hwstamp::DomainMap`]).
    Hardware(u64),
}

/// The decoded metadata of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    /// The ingress stamps, if the program counted the frame.
    pub stamps: Option<Stamps>,
    /// The RX time.
    pub stamp: RxStamp,
}

impl RxMeta {
    /// Decodes the words the program wrote (all zero: it wrote none).
    #[inline]
    pub fn decode(words: [u64; META_WORDS]) -> Self {
        let [frames, bytes, stamp] = words;
        RxMeta {
            stamps: Stamps::decode([frames, bytes]),
            stamp: match stamp {
                0 => RxStamp::None,
                s if s & STAMP_HARDWARE != 0 => RxStamp::Hardware(s & !STAMP_HARDWARE),
                s => RxStamp::Xdp(s),
            },
        }
    }

    /// The words the program writes for this metadata (tests play the program with it).
    pub fn encode(&self) -> [u64; META_WORDS] {
        let [frames, bytes] = self.stamps.map_or([0, 0], Stamps::encode);
        let stamp = match self.stamp {
            RxStamp::None => 0,
            RxStamp::Xdp(t) => t,
            RxStamp::Hardware(t) => t | STAMP_HARDWARE,
        };
        [frames, bytes, stamp]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_written_decodes_to_nothing() {
        let m = RxMeta::decode([0; META_WORDS]);
        assert_eq!(
            m,
            RxMeta {
                stamps: None,
                stamp: RxStamp::None
            }
        );
    }

    #[test]
    fn round_trip_and_the_program_layout() {
        let m = RxMeta {
            stamps: Some(Stamps {
                frames: 7,
                prio: 5,
                bytes: 1500,
            }),
            stamp: RxStamp::Hardware(1_795_000_000_123_456_789),
        };
        let w = m.encode();
        // The words exactly as bpf/lossless.bpf.c writes them.
        assert_eq!(w[0], 7);
        assert_eq!(w[1], (1 << 63) | (5 << 60) | 1500);
        assert_eq!(w[2], (1 << 63) | 1_795_000_000_123_456_789);
        assert_eq!(RxMeta::decode(w), m);
        let xdp = RxMeta {
            stamp: RxStamp::Xdp(42),
            ..m
        };
        assert_eq!(xdp.encode()[2], 42);
        assert_eq!(RxMeta::decode(xdp.encode()), xdp);
    }
}
