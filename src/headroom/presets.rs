//! Interface-delay presets for common PHYs, from IEEE 802.3.
//!
//! A preset gives, per station, the sum of the transmit and receive delays of its MAC,
//! reconciliation sublayer, extenders and PHY (802.3 specifies each sublayer's delay as the
//! sum of its TX and RX delays), the medium the PHY usually runs on, and the PAUSE/PFC
//! response-time allowance in pause quanta (802.3 Annex 31B.3.7).
//!
//! Two kinds of preset exist:
//! - *sublayer* presets (`10gbase-t`, `10gbase-r`, `xaui`) add up the 802.3 clause 44
//!   sublayer delay constraints (Table 44-2): MAC/RS/MAC Control 8,192 BT, each XGXS with
//!   its XAUI 2,048 BT, 10GBASE-T PHY 25,600 BT (clause 55), 10GBASE-R PCS 3,584 BT and a
//!   serial PMA+PMD 512 BT. The 10GBASE-R PCS and PMA/PMD numbers are recalled from Table 44-2
//!   rather than reproduced from the text; override them if your copy of 802.3 differs;
//! - *allowance* presets (`10g`, `25g`, `40g`, `50g`, `100g`, `200g`, `400g`) take the
//!   station's whole TX+RX interface delay to be its 802.3 response-time allowance:
//!   10G 67, 25G 80, 40G 118, 50G 147, 100G 394, 200G 453, 400G 905 quanta of 512 BT.
//!
//! Every preset is only a starting point: the CLI lets each station's TX and RX delay be
//! overridden.

use super::annex_n::{AnnexNInput, StationDelays};
use super::units::{Distance, Medium, Speed};
use super::{HeadroomError, Quantity, BIT_TIMES_PER_QUANTUM, MIN_FRAME_OCTETS};
use serde::Serialize;

/// One sublayer's delay (TX + RX), in bit times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DelayComponent {
    /// Sublayer name, for example `"10GBASE-T PHY"`.
    pub name: &'static str,
    /// TX + RX delay of the sublayer, in bit times.
    pub bit_times: u64,
}

/// A named interface-delay preset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhyPreset {
    /// Name used on the command line, for example `"10gbase-t"`.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Link speed, in Gb/s.
    pub speed_gbps: u64,
    /// The usual medium (sets the default cable velocity factor).
    pub medium: Medium,
    /// The sublayer delays that add up to one station's TX + RX delay.
    pub components: &'static [DelayComponent],
    /// PAUSE/PFC response-time allowance, in pause quanta (802.3 Annex 31B.3.7).
    pub response_quanta: u64,
    /// Where the numbers come from.
    pub source: &'static str,
}

const MAC_RS: DelayComponent = DelayComponent {
    name: "10G MAC, RS and MAC Control",
    bit_times: 8_192,
};
const XAUI: DelayComponent = DelayComponent {
    name: "XGXS and XAUI",
    bit_times: 2_048,
};

/// All presets, in the order `--help` lists them.
pub const PRESETS: &[PhyPreset] = &[
    PhyPreset {
        name: "10gbase-t",
        description: "10GBASE-T: MAC/RS, two XGXS+XAUI, 10GBASE-T PHY (the Annex N example)",
        speed_gbps: 10,
        medium: Medium::Copper,
        components: &[
            MAC_RS,
            XAUI,
            XAUI,
            DelayComponent {
                name: "10GBASE-T PHY",
                bit_times: 25_600,
            },
        ],
        response_quanta: 67,
        source: "IEEE 802.3 Table 44-2, clause 55; IEEE 802.1Q-2018 Annex N",
    },
    PhyPreset {
        name: "10gbase-r",
        description: "10GBASE-R (SR/LR/ER): MAC/RS, two XGXS+XAUI, 10GBASE-R PCS, serial PMA/PMD",
        speed_gbps: 10,
        medium: Medium::Fiber,
        components: &[
            MAC_RS,
            XAUI,
            XAUI,
            DelayComponent {
                name: "10GBASE-R PCS",
                bit_times: 3_584,
            },
            DelayComponent {
                name: "serial PMA and PMD",
                bit_times: 512,
            },
        ],
        response_quanta: 67,
        source: "IEEE 802.3 Table 44-2 (PCS and PMA/PMD values recalled, override if needed)",
    },
    PhyPreset {
        name: "xaui",
        description: "10G MAC/RS with XAUI extender only (add your PHY with --local-tx/--local-rx)",
        speed_gbps: 10,
        medium: Medium::Copper,
        components: &[MAC_RS, XAUI, XAUI],
        response_quanta: 67,
        source: "IEEE 802.3 Table 44-2",
    },
    allowance("10g", "10 Gb/s, response allowance 67 quanta", 10, 67),
    allowance("25g", "25 Gb/s, response allowance 80 quanta", 25, 80),
    allowance("40g", "40 Gb/s, response allowance 118 quanta", 40, 118),
    allowance("50g", "50 Gb/s, response allowance 147 quanta", 50, 147),
    allowance("100g", "100 Gb/s, response allowance 394 quanta", 100, 394),
    allowance("200g", "200 Gb/s, response allowance 453 quanta", 200, 453),
    allowance("400g", "400 Gb/s, response allowance 905 quanta", 400, 905),
];

const fn allowance(
    name: &'static str,
    description: &'static str,
    speed_gbps: u64,
    quanta: u64,
) -> PhyPreset {
    PhyPreset {
        name,
        description,
        speed_gbps,
        medium: Medium::Fiber,
        components: match quanta {
            67 => &[DelayComponent {
                name: "MAC+PCS response allowance (67 quanta)",
                bit_times: 67 * BIT_TIMES_PER_QUANTUM,
            }],
            80 => &[DelayComponent {
                name: "MAC+PCS response allowance (80 quanta)",
                bit_times: 80 * BIT_TIMES_PER_QUANTUM,
            }],
            118 => &[DelayComponent {
                name: "MAC+PCS response allowance (118 quanta)",
                bit_times: 118 * BIT_TIMES_PER_QUANTUM,
            }],
            147 => &[DelayComponent {
                name: "MAC+PCS response allowance (147 quanta)",
                bit_times: 147 * BIT_TIMES_PER_QUANTUM,
            }],
            394 => &[DelayComponent {
                name: "MAC+PCS response allowance (394 quanta)",
                bit_times: 394 * BIT_TIMES_PER_QUANTUM,
            }],
            453 => &[DelayComponent {
                name: "MAC+PCS response allowance (453 quanta)",
                bit_times: 453 * BIT_TIMES_PER_QUANTUM,
            }],
            _ => &[DelayComponent {
                name: "MAC+PCS response allowance (905 quanta)",
                bit_times: 905 * BIT_TIMES_PER_QUANTUM,
            }],
        },
        response_quanta: quanta,
        source: "IEEE 802.3 Annex 31B.3.7 (response-time allowance per speed)",
    }
}

impl PhyPreset {
    /// Link speed of the preset.
    pub fn speed(&self) -> Speed {
        Speed::from_gbps(self.speed_gbps).expect("preset speeds are non-zero")
    }

    /// One station's TX + RX delay, in bit times.
    pub fn station_bit_times(&self) -> u64 {
        self.components.iter().map(|c| c.bit_times).sum()
    }

    /// An Annex N input for this PHY: both stations use its delays and medium; PFC frame 64
    /// octets, HD 0.
    pub fn annex_n_input(&self, cable_length: Distance, max_frame_octets: u64) -> AnnexNInput {
        AnnexNInput {
            speed: self.speed(),
            cable_length,
            medium: self.medium,
            max_frame_octets,
            pfc_frame_octets: MIN_FRAME_OCTETS,
            local: self.station_delays(),
            remote: self.station_delays(),
            higher_layer_bit_times: 0,
        }
    }

    /// One station's delays, split evenly between TX and RX (802.3 only bounds the sum).
    pub fn station_delays(&self) -> StationDelays {
        let total = self.station_bit_times();
        let tx = total.div_ceil(2);
        StationDelays {
            tx_bit_times: tx,
            rx_bit_times: total - tx,
        }
    }

    /// The response-time allowance, in bit times.
    pub fn response_bit_times(&self) -> u64 {
        self.response_quanta * BIT_TIMES_PER_QUANTUM
    }
}

/// Comma-separated list of preset names.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Looks a preset up by name (case-insensitive; `_` and `-` are interchangeable).
pub fn lookup(name: &str) -> Result<&'static PhyPreset, HeadroomError> {
    let wanted = name.trim().to_ascii_lowercase().replace('_', "-");
    PRESETS
        .iter()
        .find(|p| p.name == wanted)
        .ok_or_else(|| HeadroomError::UnknownPreset {
            name: name.to_string(),
            known: preset_names(),
        })
}

/// The default preset for a speed (the response-allowance preset), if there is one.
pub fn for_speed(speed: Speed) -> Option<&'static PhyPreset> {
    PRESETS
        .iter()
        .filter(|p| p.name.ends_with('g') && p.name != "xaui")
        .find(|p| p.speed_gbps * 1_000_000_000 == speed.bps())
}

/// The default preset for `speed`, or an error naming the speed when there is none.
pub fn for_speed_or_err(speed: Speed) -> Result<&'static PhyPreset, HeadroomError> {
    for_speed(speed).ok_or_else(|| {
        HeadroomError::invalid(
            Quantity::Preset,
            format!(
                "no interface-delay preset for {speed} (presets exist for 10, 25, 40, 50, 100, \
                 200 and 400 Gb/s)"
            ),
        )
    })
}

/// The 802.3 response-time allowance for a speed, in pause quanta, if tabulated.
pub fn response_quanta_for_speed(speed: Speed) -> Option<u64> {
    for_speed(speed).map(|p| p.response_quanta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_gbase_t_station_is_37888_bt() {
        let p = lookup("10GBASE-T").unwrap();
        assert_eq!(p.station_bit_times(), 8_192 + 2 * 2_048 + 25_600);
        assert_eq!(p.station_bit_times(), 37_888);
        let d = p.station_delays();
        assert_eq!(d.tx_bit_times + d.rx_bit_times, 37_888);
        assert_eq!(p.medium, Medium::Copper);
    }

    #[test]
    fn response_allowances_per_802_3() {
        let table = [(10, 67), (25, 80), (40, 118), (100, 394), (400, 905)];
        for (g, q) in table {
            let s = Speed::from_gbps(g).unwrap();
            assert_eq!(response_quanta_for_speed(s), Some(q), "{g}G");
            assert_eq!(for_speed(s).unwrap().station_bit_times(), q * 512);
        }
        assert_eq!(lookup("400g").unwrap().response_bit_times(), 463_360);
        assert_eq!(
            response_quanta_for_speed(Speed::from_gbps(800).unwrap()),
            None
        );
    }

    #[test]
    fn unknown_preset_lists_known_ones() {
        let e = lookup("10gbase-zz").unwrap_err();
        assert_eq!(e.quantity(), Quantity::Preset);
        let msg = e.to_string();
        assert!(msg.contains("10gbase-zz") && msg.contains("10gbase-t") && msg.contains("400g"));
        assert!(for_speed_or_err(Speed::from_gbps(800).unwrap()).is_err());
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = PRESETS.iter().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PRESETS.len());
    }
}
