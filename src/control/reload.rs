//! The outcome of the last configuration reload (SIGHUP), so that a refused reload is seen by
//! more than the log: `status` shows it, the metrics carry `lossless_reload_success` and
//! `lossless_reload_timestamp_seconds`. The configuration loaded at start counts as the first
//! successful load.

use std::{
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

/// One load of the configuration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    /// The file was valid and its reloadable settings are in force.
    pub ok: bool,
    /// When, in seconds since the Unix epoch.
    pub at_unix_s: f64,
    /// Why it was refused (the running configuration stays).
    pub error: Option<String>,
    /// Settings the file changes that take effect only at a restart: the running values
    /// stay until then (kept from the last valid file while a reload is refused).
    #[serde(default)]
    pub restart_pending: Vec<String>,
}

/// The last load's outcome, shared by the reload loop, `status` and the metrics.
#[derive(Debug)]
pub struct ReloadLog(Mutex<ReloadOutcome>);

/// Seconds since the Unix epoch now.
pub fn unix_now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl ReloadLog {
    /// The log of a daemon that loaded its configuration just now.
    pub fn started() -> Self {
        ReloadLog(Mutex::new(ReloadOutcome {
            ok: true,
            at_unix_s: unix_now_s(),
            error: None,
            restart_pending: Vec::new(),
        }))
    }

    /// Records a reload: `Ok` with the settings that wait for a restart when applied, `Err`
    /// with the reason when refused.
    pub fn record(&self, result: Result<Vec<String>, String>) {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let restart_pending = match &result {
            Ok(pending) => pending.clone(),
            Err(_) => std::mem::take(&mut last.restart_pending),
        };
        *last = ReloadOutcome {
            ok: result.is_ok(),
            at_unix_s: unix_now_s(),
            error: result.err(),
            restart_pending,
        };
    }

    /// The last outcome.
    pub fn last(&self) -> ReloadOutcome {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_replaces_the_start_and_a_success_the_refusal() {
        let log = ReloadLog::started();
        let start = log.last();
        assert!(start.ok && start.error.is_none() && start.at_unix_s > 1.6e9);
        log.record(Err("port[0].iface: invalid type".into()));
        let refused = log.last();
        assert!(!refused.ok && refused.at_unix_s >= start.at_unix_s);
        assert_eq!(
            refused.error.as_deref(),
            Some("port[0].iface: invalid type")
        );
        log.record(Ok(vec!["daemon.workers".into()]));
        assert_eq!(log.last().error, None);
        assert!(log.last().ok);
        // A refused file changes nothing: what waits for a restart still does.
        log.record(Err("bad".into()));
        assert_eq!(log.last().restart_pending, ["daemon.workers"]);
        log.record(Ok(Vec::new()));
        assert!(log.last().restart_pending.is_empty());
    }
}
