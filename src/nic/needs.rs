//! What a configuration needs of each port, and the start-up probe `run` and `check-config`
//! print warnings from.

use super::{
    probe::probe,
    table,
    verdict::{diagnose, Needs, Status},
};
use crate::{config::Plan, kernel::netlink::Netlink};

/// What `plan` needs of port `iface`; `None` if `iface` is not one of its ports.
pub fn needs_for(plan: &Plan, iface: &str) -> Option<Needs> {
    let port = plan.ports.iter().find(|p| p.iface == iface)?;
    let pfc_priorities = crate::fc::plan::pfc_mask(&plan.prios);
    let headroom = plan
        .prios
        .iter()
        .filter_map(|p| p.pfc.map(|f| f.headroom))
        .max();
    Some(Needs {
        mac_control: pfc_priorities != 0,
        pfc_priorities,
        speed_bps: Some(port.speed_bps),
        headroom_bytes: headroom,
        from_config: true,
        workers: plan.daemon.workers as u32,
    })
}

/// Probes every port of `plan` and returns one warning per needed capability that fails or
/// is doubtful, each naming the fix (empty when every port can do what its priorities need).
pub fn startup_warnings(plan: &Plan) -> Vec<String> {
    let mut nl = Netlink::new(false);
    let mut out = Vec::new();
    for port in &plan.ports {
        let Some(needs) = needs_for(plan, &port.iface) else {
            continue;
        };
        let facts = probe(&port.iface, &mut nl);
        if !facts.exists() {
            out.push(format!(
                "port {}: interface not found (cannot check what it can send and receive)",
                port.iface
            ));
            continue;
        }
        let row = facts.driver_name().and_then(table::row);
        let d = diagnose(&facts, row, &needs);
        for v in d
            .verdicts
            .iter()
            .filter(|v| v.needed && v.status >= Status::Warn)
        {
            let fix = if v.fixes.is_empty() {
                if d.hardware_pfc.is_empty() {
                    "no software fix; see `lossless doctor`".to_string()
                } else {
                    format!(
                        "hand the headroom to the NIC's own PFC: {}",
                        d.hardware_pfc.join("; ")
                    )
                }
            } else {
                v.fixes.join("; ")
            };
            out.push(format!(
                "port {}: {} {}: {}; fix: {fix}",
                port.iface,
                v.capability.label(),
                v.status.label(),
                v.reasons.join("; "),
            ));
        }
    }
    out
}
