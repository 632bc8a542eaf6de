//! The kernel's netlink interfaces, read without anything of this crate above them: the
//! dataplane asks for an interface's time stamping ([`ethtool::ts_info`], hardware RX stamps)
//! and `nic` for every fact `lossless doctor` shows.
//!
//! - [`netlink`]: a small synchronous netlink client and attribute walker;
//! - [`link`]: an interface's own facts (RTM_GETLINK), the netns-true replacement for sysfs;
//! - [`ethtool`]: the `ethtool` generic netlink family, a query and a parse function per
//!   message, tested on captured replies (`tests/fixtures/nic/`).

pub mod ethtool;
pub mod link;
pub mod netlink;
