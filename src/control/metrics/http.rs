//! The metrics HTTP/1.1 server: `/metrics` (OpenMetrics, or the classic Prometheus text for
//! clients that do not ask for OpenMetrics) and `/healthz` (the workers' heartbeats), on the
//! control plane's tokio runtime, stopping with the daemon's [`Shutdown`].

use std::{
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use prometheus_client::registry::Registry;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::render;
use crate::control::shutdown::{self, Shutdown};
use crate::dataplane::stats::WorkerStats;

/// Content type of the OpenMetrics exposition.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the classic Prometheus text exposition.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Rewrites OpenMetrics text as the classic Prometheus text format (for clients that do not
/// ask for OpenMetrics, such as `promtool` and `curl`): counter families take their `_total`
/// sample name in HELP/TYPE, and the OpenMetrics-only `# UNIT` and `# EOF` lines go.
pub(super) fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                let _ = writeln!(out, "{prefix}{name}{suffix} {tail}");
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Reports whether every worker's loop advanced within a given time: a worker whose
/// heartbeat stood still that long is stalled. Judged by time, not by the call before: two
/// probers checking a few milliseconds apart (a liveness and a readiness probe) would
/// otherwise fail the second, an idle worker's loop turning only every 10 ms.
#[derive(Debug)]
pub struct Liveness {
    workers: Vec<Arc<WorkerStats>>,
    /// How long a heartbeat may stand still.
    stalled: Duration,
    /// Per worker, the heartbeat last seen and when it was first seen at that value.
    seen: Mutex<Vec<(u64, Instant)>>,
}

/// How long a worker's heartbeat may stand still before `/healthz` calls it stalled.
pub const HEALTHZ_STALLED: Duration = Duration::from_secs(1);

impl Liveness {
    /// Watches `workers`' heartbeats from now: stalled once one stood still for `stalled`
    /// ([`HEALTHZ_STALLED`]; the systemd watchdog's ping period for its pings).
    pub fn new(workers: Vec<Arc<WorkerStats>>, stalled: Duration) -> Self {
        let now = Instant::now();
        let seen = Mutex::new(workers.iter().map(|w| (w.heartbeat.get(), now)).collect());
        Liveness {
            workers,
            stalled,
            seen,
        }
    }

    /// True if every heartbeat moved within the time given at [`Liveness::new`].
    pub fn check(&self) -> bool {
        self.check_at(Instant::now())
    }

    fn check_at(&self, now: Instant) -> bool {
        let mut seen = self.seen.lock().expect("liveness lock");
        let mut alive = true;
        for (w, (beat, since)) in self.workers.iter().zip(seen.iter_mut()) {
            let b = w.heartbeat.get();
            if b != *beat {
                (*beat, *since) = (b, now);
            }
            alive &= now.saturating_duration_since(*since) < self.stalled;
        }
        alive
    }
}

/// Serves `/metrics` and `/healthz` on `listener` until `shutdown`, then drains
/// ([`shutdown::serve`]).
pub async fn serve(
    listener: TcpListener,
    registry: Arc<Registry>,
    liveness: Arc<Liveness>,
    shutdown: Arc<Shutdown>,
) {
    shutdown::serve(listener, &shutdown, |conn| {
        let (registry, liveness) = (registry.clone(), liveness.clone());
        async move {
            let _ = answer(conn, &registry, &liveness).await;
        }
    })
    .await;
}

async fn answer(
    mut conn: TcpStream,
    registry: &Registry,
    liveness: &Liveness,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
        if n == buf.len() {
            return respond(
                &mut conn,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
        }
        let got = conn.read(&mut buf[n..]).await?;
        if got == 0 {
            return Ok(());
        }
        n += got;
    }
    let head = String::from_utf8_lossy(&buf[..n]);
    let openmetrics = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("accept:") && l.contains("application/openmetrics-text")
    });
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method != "GET" {
        return respond(
            &mut conn,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        )
        .await;
    }
    match path.split('?').next().unwrap_or("") {
        "/metrics" if openmetrics => {
            respond(&mut conn, "200 OK", OPENMETRICS, &render(registry)).await
        }
        "/metrics" => {
            let body = to_prometheus_text(&render(registry));
            respond(&mut conn, "200 OK", PROMETHEUS_TEXT, &body).await
        }
        "/healthz" if liveness.check() => respond(&mut conn, "200 OK", "text/plain", "ok\n").await,
        "/healthz" => {
            respond(
                &mut conn,
                "503 Service Unavailable",
                "text/plain",
                "a worker is stalled\n",
            )
            .await
        }
        _ => {
            respond(
                &mut conn,
                "404 Not Found",
                "text/plain",
                "try /metrics or /healthz\n",
            )
            .await
        }
    }
}

async fn respond(
    conn: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = String::new();
    let _ = write!(
        head,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_counter_families_with_total() {
        let om = "# HELP x_frames Frames.\n# TYPE x_frames counter\nx_frames_total{a=\"b\"} 3\n\
                  # HELP x_depth Depth.\n# TYPE x_depth gauge\n# UNIT x_depth bytes\nx_depth 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP x_frames_total Frames.\n# TYPE x_frames_total counter\nx_frames_total{a=\"b\"} 3\n\
             # HELP x_depth Depth.\n# TYPE x_depth gauge\nx_depth 1\n"
        );
    }

    #[test]
    fn liveness_needs_a_heartbeat_within_a_second() {
        let w = Arc::new(WorkerStats::new(1));
        let l = Liveness::new(vec![w.clone()], HEALTHZ_STALLED);
        let t0 = Instant::now();
        assert!(l.check_at(t0));
        // A second prober 5 ms later: the heartbeat has not moved yet, and that is no stall.
        assert!(l.check_at(t0 + Duration::from_millis(5)));
        assert!(!l.check_at(t0 + HEALTHZ_STALLED), "still for a second");
        w.heartbeat.add(1);
        assert!(l.check_at(t0 + HEALTHZ_STALLED + Duration::from_millis(1)));
        assert!(!l.check_at(t0 + 2 * HEALTHZ_STALLED + Duration::from_millis(1)));
    }
}
