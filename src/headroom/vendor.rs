//! Vendor headroom formulas, re-derived for `--compare` so an operator can see how far a
//! vendor default is from the link's needs.
//!
//! **Linux mlx5** (source: the Linux kernel, `drivers/net/ethernet/mellanox/mlx5/core/en/
//! port_buffer.c`, `calculate_xoff()` and `update_xoff_threshold()`): the driver reserves
//!
//! ```text
//! xoff [B] = (301 + 2.16·len[m]) · speed[Gb/s] + 2.72 · MTU[B]
//! ```
//!
//! evaluated in integer arithmetic as `(301 + 216·len/100) · speed_Mbps/1000 + 272·MTU/100`,
//! with the speed raised to at least 40 Gb/s. A lossless buffer must be at least
//! `xoff + max_mtu + cell` bytes (max_mtu is the netdev's maximum MTU, at least 9216); the
//! XOFF threshold is then `size − xoff` and XON `XOFF − max_mtu`. The cable length defaults to
//! 7 m (the driver's default as recalled, `MLX5E_DEFAULT_CABLE_LEN`; settable with
//! `dcb`/`mlnx_qos --cable_len`). Our reading of the constants (not stated in the source): 301
//! is a fixed latency allowance in bytes per Gb/s, 2.16 per metre covers the cable round trip,
//! and 2.72·MTU the frames in flight.
//!
//! **SONiC dynamic buffer calculation, Mellanox** (source: `sonic-net/sonic-swss`,
//! `cfgmgr/buffer_headroom_mellanox.lua`; ASIC parameters from the ASIC_TABLE examples in the
//! SONiC dynamic-headroom design and sonic-buildimage's Mellanox templates):
//!
//! ```text
//! worst-case factor  = cell/64 if cell > 128 else 2·cell/(1 + cell)
//! cell occupancy     = (100 − small% + small%·worst-case factor) / 100
//! peer response      = pause_quanta(speed) · 512 / 8 B    (802.3 Annex 31B table)
//! bytes on cable     = 2 · len · speed_Mbps · 10⁹ / 198,000,000 / 8192
//! bytes on gearbox   = speed_Mbps · gearbox_ns / 8192
//! propagation        = port MTU + cable + 2·gearbox + mac_phy_delay + peer response
//! xoff               = ⌈lossless MTU + propagation · occupancy⌉₁₀₂₄
//! xon                = ⌈pipeline latency⌉₁₀₂₄               (8 lanes: 2·latency − 1 KiB)
//! size               = ⌈xoff + xon (+ port MTU on 8-lane ports)⌉₁₀₂₄, or xon alone when a
//!                      shared headroom pool is configured
//! ```
//!
//! (The `/8192` and `·10⁹` mix in the Lua converts Mb/s·m/(m/s) to bytes with 1024 standing in
//! for 1000, so its cable and gearbox bytes are 2.3% low; reproduced as is.)

use super::units::Speed;
use super::{HeadroomError, Quantity, Term, BIT_TIMES_PER_QUANTUM, MAX_TERM_BIT_TIMES};
use serde::Serialize;

/// The mlx5 driver's default cable length, metres.
pub const MLX5_DEFAULT_CABLE_LEN_M: u64 = 7;
/// The mlx5 driver's floor on max_mtu when sizing thresholds, bytes.
pub const MLX5_MINIMUM_MAX_MTU: u64 = 9216;
/// The mlx5 default buffer cell size (1 << 7), bytes.
pub const MLX5_DEFAULT_CELL: u64 = 128;

/// Inputs of the mlx5 formula.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mlx5Input {
    /// Link speed (clamped to ≥ 40 Gb/s by the driver).
    pub speed: Speed,
    /// Cable length, whole metres.
    pub cable_length_m: u64,
    /// Netdev MTU, bytes.
    pub mtu: u64,
    /// Netdev max MTU (the driver uses at least 9216), bytes.
    pub max_mtu: u64,
    /// Port buffer cell size, bytes.
    pub cell_size: u64,
    /// Lossless buffer size, to place thresholds; `None` skips them.
    pub buffer_bytes: Option<u64>,
}

/// The mlx5 result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mlx5Result {
    /// The inputs, echoed.
    pub input: Mlx5Input,
    /// Speed the formula used, Mb/s.
    pub effective_speed_mbps: u64,
    /// Terms of `xoff`.
    pub terms: Vec<Term>,
    /// The headroom the driver reserves above XOFF, bytes.
    pub xoff_bytes: u64,
    /// Smallest lossless buffer the driver accepts: xoff + max_mtu + cell, bytes.
    pub min_buffer_bytes: u64,
    /// XOFF threshold (size − xoff), if a buffer was given.
    pub xoff_threshold: Option<u64>,
    /// XON threshold (XOFF − max_mtu), if a buffer was given.
    pub xon_threshold: Option<u64>,
}

/// The mlx5 driver's xoff (headroom) and thresholds.
pub fn mlx5(input: &Mlx5Input) -> Result<Mlx5Result, HeadroomError> {
    let speed = input.speed.mbps().max(40_000);
    let link = input
        .cable_length_m
        .checked_mul(216)
        .map(|c| 301 + c / 100)
        .and_then(|per_gb| per_gb.checked_mul(speed))
        .map(|l| l / 1000)
        .filter(|&l| l <= MAX_TERM_BIT_TIMES)
        .ok_or_else(|| {
            HeadroomError::invalid(
                Quantity::CableLength,
                format!(
                    "{} m is beyond what the mlx5 formula can be evaluated for",
                    input.cable_length_m
                ),
            )
        })?;
    let fixed = 301 * speed / 1000;
    let mtu_term = 272 * input.mtu / 100;
    let xoff = link + mtu_term;
    let max_mtu = input.max_mtu.max(MLX5_MINIMUM_MAX_MTU);
    let min_buffer = xoff + max_mtu + input.cell_size;
    let (xoff_thr, xon_thr) = match input.buffer_bytes {
        None => (None, None),
        Some(b) if b < min_buffer => {
            return Err(HeadroomError::BufferTooSmall {
                buffer: b,
                headroom: xoff,
                mtu: max_mtu,
                needed: min_buffer,
            })
        }
        Some(b) => (Some(b - xoff), Some(b - xoff - max_mtu)),
    };
    let terms = vec![
        Term::from_bytes("fixed latency", format!("301 x {speed}/1000"), fixed),
        Term::from_bytes(
            "cable",
            format!("(216 x {} m/100) x {speed}/1000", input.cable_length_m),
            link - fixed,
        ),
        Term::from_bytes("2.72 x MTU", format!("272 x {}/100", input.mtu), mtu_term),
    ];
    Ok(Mlx5Result {
        input: input.clone(),
        effective_speed_mbps: speed,
        terms,
        xoff_bytes: xoff,
        min_buffer_bytes: min_buffer,
        xoff_threshold: xoff_thr,
        xon_threshold: xon_thr,
    })
}

/// Per-ASIC parameters of SONiC's Mellanox headroom calculation (STATE_DB ASIC_TABLE).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SonicAsic {
    /// Name.
    pub name: &'static str,
    /// Cell size, bytes.
    pub cell_size: u64,
    /// Pipeline latency, KiB.
    pub pipeline_latency_kib: f64,
    /// MAC/PHY delay, KiB.
    pub mac_phy_delay_kib: f64,
    /// Peer response time used when the speed is not in the pause-quanta table, KiB.
    pub peer_response_time_kib: f64,
}

/// Mellanox Spectrum-1 ASIC_TABLE values.
pub const SPECTRUM1: SonicAsic = SonicAsic {
    name: "spectrum1",
    cell_size: 96,
    pipeline_latency_kib: 18.0,
    mac_phy_delay_kib: 0.8,
    peer_response_time_kib: 3.8,
};

/// Mellanox Spectrum-2 ASIC_TABLE values.
pub const SPECTRUM2: SonicAsic = SonicAsic {
    name: "spectrum2",
    cell_size: 144,
    pipeline_latency_kib: 18.0,
    mac_phy_delay_kib: 0.8,
    peer_response_time_kib: 3.8,
};

/// Known SONiC ASIC parameter sets.
pub const SONIC_ASICS: &[SonicAsic] = &[SPECTRUM1, SPECTRUM2];

/// Looks an ASIC parameter set up by name.
pub fn sonic_asic(name: &str) -> Result<SonicAsic, HeadroomError> {
    let n = name.trim().to_ascii_lowercase().replace(['-', '_'], "");
    SONIC_ASICS
        .iter()
        .copied()
        .find(|a| {
            a.name == n
                || (n == "spc1" && a.name == "spectrum1")
                || (n == "spc2" && a.name == "spectrum2")
        })
        .ok_or_else(|| {
            HeadroomError::invalid(
                Quantity::Preset,
                format!("unknown SONiC ASIC {name:?}; known: spectrum1, spectrum2"),
            )
        })
}

/// SONiC's pause-quanta table (802.3 Annex 31B), by speed in Mb/s.
pub fn sonic_pause_quanta(speed_mbps: u64) -> Option<u64> {
    match speed_mbps {
        400_000 => Some(905),
        200_000 => Some(453),
        100_000 => Some(394),
        50_000 => Some(147),
        40_000 => Some(118),
        25_000 => Some(80),
        10_000 => Some(67),
        1_000 => Some(2),
        100 => Some(1),
        _ => None,
    }
}

/// Inputs of SONiC's calculation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SonicInput {
    /// Port speed.
    pub speed: Speed,
    /// Cable length, metres.
    pub cable_length_m: f64,
    /// Port MTU, bytes (SONiC default 9100).
    pub port_mtu: u64,
    /// LOSSLESS_TRAFFIC_PATTERN mtu, bytes (default 1024).
    pub lossless_mtu: u64,
    /// LOSSLESS_TRAFFIC_PATTERN small_packet_percentage (default 100).
    pub small_packet_percentage: f64,
    /// Gearbox delay, ns (0 = none).
    pub gearbox_delay_ns: f64,
    /// ASIC parameters.
    pub asic: SonicAsic,
    /// Whether a shared headroom pool is configured.
    pub shared_headroom_pool: bool,
    /// Whether the port uses 8 lanes.
    pub eight_lanes: bool,
}

impl SonicInput {
    /// SONiC defaults for `speed` and `cable_length_m` on `asic`.
    pub fn new(speed: Speed, cable_length_m: f64, asic: SonicAsic) -> Self {
        SonicInput {
            speed,
            cable_length_m,
            port_mtu: 9100,
            lossless_mtu: 1024,
            small_packet_percentage: 100.0,
            gearbox_delay_ns: 0.0,
            asic,
            shared_headroom_pool: false,
            eight_lanes: false,
        }
    }
}

/// SONiC's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SonicResult {
    /// The inputs, echoed.
    pub input: SonicInput,
    /// Cell occupancy factor.
    pub cell_occupancy: f64,
    /// Peer response, bytes.
    pub peer_response_bytes: f64,
    /// Terms of the headroom `size` (xoff terms, xoff rounding, xon, size rounding).
    pub terms: Vec<Term>,
    /// xoff, bytes.
    pub xoff_bytes: u64,
    /// xon, bytes.
    pub xon_bytes: u64,
    /// PG headroom size, bytes.
    pub size_bytes: u64,
}

fn ceil_kib(x: f64) -> u64 {
    (super::ceil_tolerant(x / 1024.0) as u64) * 1024
}

/// SONiC's Mellanox headroom calculation.
pub fn sonic(input: &SonicInput) -> Result<SonicResult, HeadroomError> {
    let p = input.small_packet_percentage;
    if !(0.0..=100.0).contains(&p) {
        return Err(HeadroomError::invalid(
            Quantity::CellSize,
            format!("small packet percentage must be within 0..=100, got {p}"),
        ));
    }
    if !(input.cable_length_m.is_finite() && input.cable_length_m >= 0.0) {
        return Err(HeadroomError::invalid(
            Quantity::CableLength,
            "must be a non-negative length",
        ));
    }
    let mbps = input.speed.mbps() as f64;
    let cell = input.asic.cell_size as f64;
    let wcf = if cell > 128.0 {
        cell / 64.0
    } else {
        2.0 * cell / (1.0 + cell)
    };
    let occ = (100.0 - p + p * wcf) / 100.0;
    let peer = match sonic_pause_quanta(input.speed.mbps()) {
        Some(q) => (q * BIT_TIMES_PER_QUANTUM) as f64 / 8.0,
        None => input.asic.peer_response_time_kib * 1024.0,
    };
    let cable = 2.0 * input.cable_length_m * mbps * 1e9 / 198_000_000.0 / 8192.0;
    let gearbox = if input.gearbox_delay_ns == 0.0 {
        0.0
    } else {
        mbps * input.gearbox_delay_ns / 8192.0
    };
    let mac_phy = input.asic.mac_phy_delay_kib * 1024.0;
    let mut pipeline = input.asic.pipeline_latency_kib * 1024.0;
    let mut overhead = 0.0;
    if input.eight_lanes {
        pipeline = pipeline * 2.0 - 1024.0;
        overhead = input.port_mtu as f64;
    }
    let raw_xoff = input.lossless_mtu as f64
        + (input.port_mtu as f64 + cable + 2.0 * gearbox + mac_phy + peer) * occ;
    let xoff = ceil_kib(raw_xoff);
    let xon = ceil_kib(pipeline);
    let raw_size = if input.shared_headroom_pool {
        xon as f64
    } else {
        (xoff + xon) as f64 + overhead
    };
    let size = ceil_kib(raw_size);
    let o = format!("x {occ:.4} cell occupancy");
    let mut terms = Vec::new();
    if !input.shared_headroom_pool {
        terms.extend([
            Term::from_bytes(
                "lossless MTU",
                "LOSSLESS_TRAFFIC_PATTERN mtu",
                input.lossless_mtu,
            ),
            Term::from_fractional_bytes("port MTU", o.clone(), input.port_mtu as f64 * occ),
            Term::from_fractional_bytes(
                "bytes on cable",
                format!("2 x {} m at 1.98e8 m/s {o}", input.cable_length_m),
                cable * occ,
            ),
            Term::from_fractional_bytes("2 x gearbox", o.clone(), 2.0 * gearbox * occ),
            Term::from_fractional_bytes("MAC/PHY delay", o.clone(), mac_phy * occ),
            Term::from_fractional_bytes("peer response", o, peer * occ),
            Term::from_fractional_bytes("round xoff up to 1 KiB", "", xoff as f64 - raw_xoff),
        ]);
    }
    terms.push(Term::from_bytes(
        "xon (pipeline latency)",
        "rounded up to 1 KiB",
        xon,
    ));
    if overhead > 0.0 {
        terms.push(Term::from_fractional_bytes(
            "8-lane speed overhead",
            "port MTU",
            overhead,
        ));
    }
    terms.push(Term::from_fractional_bytes(
        "round size up to 1 KiB",
        "",
        size as f64 - raw_size,
    ));
    Ok(SonicResult {
        input: input.clone(),
        cell_occupancy: occ,
        peer_response_bytes: peer,
        terms,
        xoff_bytes: xoff,
        xon_bytes: xon,
        size_bytes: size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlx(gbps: u64, len: u64, mtu: u64) -> Mlx5Input {
        Mlx5Input {
            speed: Speed::from_gbps(gbps).unwrap(),
            cable_length_m: len,
            mtu,
            max_mtu: 9216,
            cell_size: 128,
            buffer_bytes: None,
        }
    }

    /// 100G, 7 m, MTU 1500: (301 + 15)·100 + 4,080 = 35,680 B.
    #[test]
    fn mlx5_worked_examples() {
        let r = mlx5(&mlx(100, 7, 1500)).unwrap();
        assert_eq!(r.xoff_bytes, 35_680);
        let parts: Vec<u64> = r.terms.iter().map(|t| t.bit_times / 8).collect();
        assert_eq!(parts, vec![30_100, 1_500, 4_080]);
        // 10G is clamped to 40G: (301 + 15)·40 + 4,080 = 16,720 B.
        assert_eq!(mlx5(&mlx(10, 7, 1500)).unwrap().xoff_bytes, 16_720);
        assert_eq!(
            mlx5(&mlx(10, 7, 1500)).unwrap().effective_speed_mbps,
            40_000
        );
        // 400G, 100 m, MTU 9000: (301 + 216)·400 + 24,480 = 231,280 B.
        assert_eq!(mlx5(&mlx(400, 100, 9000)).unwrap().xoff_bytes, 231_280);
    }

    #[test]
    fn mlx5_thresholds() {
        let mut i = mlx(100, 7, 1500);
        i.buffer_bytes = Some(100_000);
        let r = mlx5(&i).unwrap();
        assert_eq!(r.min_buffer_bytes, 35_680 + 9216 + 128);
        assert_eq!(r.xoff_threshold, Some(64_320));
        assert_eq!(r.xon_threshold, Some(55_104));
        i.buffer_bytes = Some(40_000);
        assert_eq!(mlx5(&i).unwrap_err().quantity(), Quantity::Buffer);
    }

    /// A cable too long for the integer formula (216·len·speed wrapped) is an error.
    #[test]
    fn mlx5_cable_beyond_the_formula() {
        for len in [u64::MAX, 600_000_000_000_000] {
            let e = mlx5(&mlx(100, len, 1500)).unwrap_err();
            assert_eq!(e.quantity(), Quantity::CableLength, "{len}");
        }
    }

    /// Spectrum-2, 100G, 5 m, port MTU 9100: occupancy 2.25; cable 616.52 B; MAC/PHY 819.2 B;
    /// peer 394·64 = 25,216 B; xoff = ⌈1024 + 35,751.72·2.25 = 81,465.36⌉₁₀₂₄ = 81,920;
    /// xon = 18,432; size = 100,352.
    #[test]
    fn sonic_worked_example() {
        let r = sonic(&SonicInput::new(
            Speed::from_gbps(100).unwrap(),
            5.0,
            SPECTRUM2,
        ))
        .unwrap();
        assert!((r.cell_occupancy - 2.25).abs() < 1e-12);
        assert_eq!(r.peer_response_bytes, 25_216.0);
        assert_eq!(r.xoff_bytes, 81_920);
        assert_eq!(r.xon_bytes, 18_432);
        assert_eq!(r.size_bytes, 100_352);
        let total: f64 = r.terms.iter().map(|t| t.bytes).sum();
        assert!((total - 100_352.0).abs() < 1e-6);
    }

    #[test]
    fn sonic_variants() {
        let s = Speed::from_gbps(100).unwrap();
        // Spectrum-1: cell 96 <= 128 -> factor 2·96/97.
        let r = sonic(&SonicInput::new(s, 5.0, SPECTRUM1)).unwrap();
        assert!((r.cell_occupancy - 192.0 / 97.0).abs() < 1e-12);
        // Shared headroom pool: size = xon.
        let mut i = SonicInput::new(s, 5.0, SPECTRUM2);
        i.shared_headroom_pool = true;
        assert_eq!(sonic(&i).unwrap().size_bytes, 18_432);
        // 8 lanes: xon = 2·18 KiB − 1 KiB = 35 KiB; size adds the port MTU.
        let mut i = SonicInput::new(Speed::from_gbps(400).unwrap(), 5.0, SPECTRUM2);
        i.eight_lanes = true;
        let r = sonic(&i).unwrap();
        assert_eq!(r.xon_bytes, 35 * 1024);
        assert_eq!(
            r.size_bytes,
            (r.xoff_bytes + r.xon_bytes + 9100).div_ceil(1024) * 1024
        );
        // Speed not in the table: the ASIC's peer response time is used.
        let r = sonic(&SonicInput::new(
            Speed::from_gbps(800).unwrap(),
            5.0,
            SPECTRUM2,
        ))
        .unwrap();
        assert!((r.peer_response_bytes - 3.8 * 1024.0).abs() < 1e-9);
        assert!(sonic_asic("SPC2").is_ok());
        assert!(sonic_asic("tomahawk").is_err());
    }
}
