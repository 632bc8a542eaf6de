//! IEEE 802.1Q-2018 Annex N delay value: the worst-case amount of data (in bit times) that
//! can still arrive on a priority after the receiver decides to send PFC XOFF.
//!
//! ```text
//! DV = 2·MaxFrame + PFCFrame + 2·CableDelay + (TX_s1 + RX_s2) + (TX_s2 + RX_s1) + HD
//! ```
//!
//! - `MaxFrame`: a frame of L octets occupies (L + 20)·8 bit times (preamble, SFD and
//!   inter-frame gap). One maximum frame may be in transmission at the receiver when it wants
//!   to send PFC (the PFC frame waits behind it), and one at the sender when the PFC arrives.
//! - `PFCFrame`: the PFC frame itself, 64 octets → 672 BT.
//! - `CableDelay`: length / (v · bit time), v = velocity factor · c, rounded up to a whole
//!   bit time; twice, for the PFC going out and the last data coming back.
//! - `TX_sN`/`RX_sN`: the interface (MAC, RS, extender, PHY) delays of station N, from
//!   [`super::presets`] or the operator.
//! - `HD`: higher-layer delay (MACsec SecY, memory pipelining, the time to decide to pause).
//!
//! Worked example (802.1Q-2018 Annex N): 10GBASE-T, 100 m of cat6, 2000-octet frames,
//! HD = 6,144 BT → DV = 126,024 BT (15,753 bytes).

use super::units::{Distance, Duration, Medium, Speed};
use super::{check_bit_times, check_frame, frame_bit_times, HeadroomError, Quantity, Term};
use serde::Serialize;

/// One station's interface delays, in bit times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StationDelays {
    /// Transmit-path delay (MAC to medium).
    pub tx_bit_times: u64,
    /// Receive-path delay (medium to MAC).
    pub rx_bit_times: u64,
}

/// Inputs of the Annex N delay value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnexNInput {
    /// Link speed.
    pub speed: Speed,
    /// Cable length.
    pub cable_length: Distance,
    /// Cable medium (velocity factor).
    pub medium: Medium,
    /// Largest frame on the priority, octets (destination address through FCS).
    pub max_frame_octets: u64,
    /// PFC frame size, octets (64).
    pub pfc_frame_octets: u64,
    /// Station 1 (the receiver that sends PFC) interface delays.
    pub local: StationDelays,
    /// Station 2 (the sender that obeys PFC) interface delays.
    pub remote: StationDelays,
    /// Higher-layer delay HD, bit times.
    pub higher_layer_bit_times: u64,
}

impl AnnexNInput {
    /// Checks the frame sizes and the delays given in bit times.
    pub fn validate(&self) -> Result<(), HeadroomError> {
        check_frame(Quantity::MaxFrame, self.max_frame_octets)?;
        check_frame(Quantity::PfcFrame, self.pfc_frame_octets)?;
        for (q, bt) in [
            (Quantity::HigherLayerDelay, self.higher_layer_bit_times),
            (Quantity::LocalTx, self.local.tx_bit_times),
            (Quantity::LocalRx, self.local.rx_bit_times),
            (Quantity::RemoteTx, self.remote.tx_bit_times),
            (Quantity::RemoteRx, self.remote.rx_bit_times),
        ] {
            check_bit_times(q, bt)?;
        }
        Ok(())
    }
}

/// The Annex N delay value with every term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnexNResult {
    /// The inputs, echoed.
    pub input: AnnexNInput,
    /// One-way cable delay, bit times (rounded up).
    pub cable_delay_bit_times: u64,
    /// The terms of DV, in formula order; they add up to `delay_value_bit_times`.
    pub terms: Vec<Term>,
    /// DV, bit times.
    pub delay_value_bit_times: u64,
    /// DV in bytes, rounded up.
    pub delay_value_bytes: u64,
    /// DV as a time at the link's speed.
    pub delay_value_time: Duration,
}

/// One-way cable delay in bit times, rounded up: length / (v·c) · speed.
pub fn cable_delay_bit_times(
    speed: Speed,
    length: Distance,
    medium: Medium,
) -> Result<u64, HeadroomError> {
    speed.bit_times_in(length.propagation(medium), Quantity::CableLength)
}

/// Computes the Annex N delay value.
pub fn delay_value(input: &AnnexNInput) -> Result<AnnexNResult, HeadroomError> {
    input.validate()?;
    let max = frame_bit_times(input.max_frame_octets);
    let pfc = frame_bit_times(input.pfc_frame_octets);
    let cable = cable_delay_bit_times(input.speed, input.cable_length, input.medium)?;
    let (l, r) = (input.local, input.remote);
    let terms = vec![
        Term::from_bit_times(
            "2 x max frame",
            format!("2 x ({} + 20) x 8", input.max_frame_octets),
            2 * max,
        ),
        Term::from_bit_times(
            "PFC frame",
            format!("({} + 20) x 8", input.pfc_frame_octets),
            pfc,
        ),
        Term::from_bit_times(
            "2 x cable delay",
            format!(
                "2 x {} / ({} x 3e8 m/s) = 2 x {cable}",
                input.cable_length,
                super::units::trim_float(input.medium.velocity_factor()) + "c"
            ),
            2 * cable,
        ),
        Term::from_bit_times(
            "TX s1 + RX s2",
            format!("{} + {}", l.tx_bit_times, r.rx_bit_times),
            l.tx_bit_times + r.rx_bit_times,
        ),
        Term::from_bit_times(
            "TX s2 + RX s1",
            format!("{} + {}", r.tx_bit_times, l.rx_bit_times),
            r.tx_bit_times + l.rx_bit_times,
        ),
        Term::from_bit_times(
            "higher-layer delay HD",
            "configured",
            input.higher_layer_bit_times,
        ),
    ];
    let dv = super::total_bit_times(&terms);
    Ok(AnnexNResult {
        input: input.clone(),
        cable_delay_bit_times: cable,
        terms,
        delay_value_bit_times: dv,
        delay_value_bytes: dv.div_ceil(8),
        delay_value_time: input.speed.duration_of(dv),
    })
}

#[cfg(test)]
mod tests {
    use super::super::presets::lookup;
    use super::*;

    fn example() -> AnnexNInput {
        let mut i = lookup("10gbase-t")
            .unwrap()
            .annex_n_input("100m".parse().unwrap(), 2000);
        i.higher_layer_bit_times = 6_144;
        i
    }

    /// 802.1Q-2018 Annex N worked example, to the bit time:
    /// 2·16,160 + 672 + 2·5,556 + 37,888 + 37,888 + 6,144 = 126,024 BT.
    #[test]
    fn annex_n_worked_example() {
        let r = delay_value(&example()).unwrap();
        let bt: Vec<u64> = r.terms.iter().map(|t| t.bit_times).collect();
        assert_eq!(bt, vec![32_320, 672, 11_112, 37_888, 37_888, 6_144]);
        assert_eq!(r.cable_delay_bit_times, 5_556);
        assert_eq!(r.delay_value_bit_times, 126_024);
        assert_eq!(r.delay_value_bytes, 15_753);
        assert!((r.delay_value_time.nanos() - 12_602.4).abs() < 1e-6);
    }

    /// 100G allowance preset, 3 m DAC-like fibre, 9216-octet jumbo frames, HD 0:
    /// 2·(9236·8) + 672 + 2·ceil(3/(0.66·3e8)·1e11 = 1,515.15) + 2·201,728
    /// = 147,776 + 672 + 3,032 + 403,456 = 554,936 BT = 69,367 bytes.
    #[test]
    fn hundred_gig_jumbo() {
        let i = lookup("100g")
            .unwrap()
            .annex_n_input("3m".parse().unwrap(), 9216);
        let r = delay_value(&i).unwrap();
        assert_eq!(r.cable_delay_bit_times, 1_516);
        assert_eq!(r.delay_value_bit_times, 147_776 + 672 + 3_032 + 403_456);
        assert_eq!(r.delay_value_bit_times, 554_936);
        assert_eq!(r.delay_value_bytes, 69_367);
    }

    #[test]
    fn terms_add_up_and_bytes_are_eighths() {
        let r = delay_value(&example()).unwrap();
        let sum: f64 = r.terms.iter().map(|t| t.bytes).sum();
        assert!((sum - 15_753.0).abs() < 1e-9);
    }

    #[test]
    fn rejects_tiny_frames() {
        let mut i = example();
        i.max_frame_octets = 10;
        assert_eq!(delay_value(&i).unwrap_err().quantity(), Quantity::MaxFrame);
        let mut i = example();
        i.pfc_frame_octets = 0;
        assert_eq!(delay_value(&i).unwrap_err().quantity(), Quantity::PfcFrame);
    }

    /// Inputs that made the u64 sums wrap (a DV smaller than a 100 m link's) are errors
    /// naming the quantity.
    #[test]
    fn out_of_range_inputs_are_errors_not_wraps() {
        let check = |f: &dyn Fn(&mut AnnexNInput), q: Quantity| {
            let mut i = example();
            f(&mut i);
            assert_eq!(delay_value(&i).unwrap_err().quantity(), q);
        };
        check(
            &|i| i.max_frame_octets = 2_305_843_009_213_693_952,
            Quantity::MaxFrame,
        );
        check(&|i| i.max_frame_octets = 65_536, Quantity::MaxFrame);
        check(&|i| i.pfc_frame_octets = u64::MAX, Quantity::PfcFrame);
        check(
            &|i| i.higher_layer_bit_times = 18_446_744_073_709_551_000,
            Quantity::HigherLayerDelay,
        );
        check(&|i| i.local.tx_bit_times = u64::MAX, Quantity::LocalTx);
        check(&|i| i.local.rx_bit_times = u64::MAX, Quantity::LocalRx);
        check(&|i| i.remote.tx_bit_times = u64::MAX, Quantity::RemoteTx);
        check(&|i| i.remote.rx_bit_times = u64::MAX, Quantity::RemoteRx);
        check(
            &|i| i.cable_length = Distance::from_meters(1e303).unwrap(),
            Quantity::CableLength,
        );
        // At the limits everything adds up exactly (computed in u128).
        let mut i = example();
        i.max_frame_octets = crate::headroom::MAX_FRAME_OCTETS;
        i.higher_layer_bit_times = crate::headroom::MAX_TERM_BIT_TIMES;
        i.local = StationDelays {
            tx_bit_times: crate::headroom::MAX_TERM_BIT_TIMES,
            rx_bit_times: crate::headroom::MAX_TERM_BIT_TIMES,
        };
        i.remote = i.local;
        let r = delay_value(&i).unwrap();
        let want: u128 = 2 * (65_535 + 20) * 8 + 672 + 11_112 + 5 * (1u128 << 48);
        assert_eq!(u128::from(r.delay_value_bit_times), want);
    }

    #[test]
    fn zero_length_cable_has_no_cable_term() {
        let mut i = example();
        i.cable_length = Distance::from_meters(0.0).unwrap();
        let r = delay_value(&i).unwrap();
        assert_eq!(r.delay_value_bit_times, 126_024 - 11_112);
    }
}
