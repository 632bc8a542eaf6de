//! Logging through `tracing` to stderr: human text (coloured only when stderr is a terminal
//! and `NO_COLOR` is unset), or one JSON object per line for journald pipelines
//! (`LOSSLESS_LOG_FORMAT=json`). The filter (`LOSSLESS_LOG`, else the config's
//! `[daemon] log`, else `info`) can be replaced while running (SIGHUP reload).

use std::{io::IsTerminal, sync::OnceLock};

use tracing_subscriber::{
    fmt, layer::SubscriberExt, reload, util::SubscriberInitExt, EnvFilter, Registry,
};

static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Environment variable holding the filter; it wins over the configuration file.
pub const LOG_ENV: &str = "LOSSLESS_LOG";

/// Installs the global subscriber. Call once, first thing in `main`.
pub fn init() {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    let json = std::env::var("LOSSLESS_LOG_FORMAT").is_ok_and(|v| v == "json");
    // Colour only for a person at a terminal: journald, pipes and files get plain text.
    let color = std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(filter)
        .with(json.then(|| fmt::layer().json().with_writer(std::io::stderr)))
        .with((!json).then(|| fmt::layer().with_ansi(color).with_writer(std::io::stderr)))
        .init();
    let _ = FILTER.set(handle);
}

/// Applies the configuration's filter directive (none: `info`, so that a reload which
/// removes `[daemon] log` goes back to the default), unless `LOSSLESS_LOG` overrides it.
pub fn apply_config_filter(directive: Option<&str>) -> Result<(), String> {
    let d = directive.unwrap_or("info");
    if std::env::var_os(LOG_ENV).is_some() {
        return Ok(());
    }
    let filter = EnvFilter::try_new(d).map_err(|e| format!("log filter {d:?}: {e}"))?;
    match FILTER.get() {
        Some(h) => h.reload(filter).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}
