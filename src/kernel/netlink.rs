//! A small synchronous netlink client: one request, its replies as raw bytes, and helpers to
//! walk the attributes of those replies.
//!
//! Requests are framed by hand (they are a header and one or two attributes); replies are kept
//! as the datagrams the kernel sent, so `lossless doctor --dump-netlink` can store them and the
//! parsers can be tested on exactly those bytes. Parsing uses `netlink-packet-core`'s checked
//! buffers: a short or inconsistent reply is a [`NlError::Malformed`], never a panic.

use std::collections::BTreeMap;

use netlink_packet_core::{
    ErrorBuffer, NetlinkBuffer, NlaBuffer, NlasIterator, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK,
    NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_sys::{protocols, Socket, SocketAddr};

/// `NLA_F_NESTED`: set on nested attributes we send.
const NLA_F_NESTED: u16 = 0x8000;
/// Attribute type bits (without the nested / byte-order flags).
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Generic netlink's controller family and its GETFAMILY command and attributes.
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// Extended-ACK attribute carrying the kernel's message.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// Why a netlink request failed or its reply could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NlError {
    /// The socket could not be opened, or sending or receiving failed.
    #[error("netlink socket: {0}")]
    Io(String),
    /// The kernel answered with an error.
    #[error("the kernel answered {}{}", errno_text(*errno), msg.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Kernel {
        /// Positive errno.
        errno: i32,
        /// The kernel's extended-ACK message, if it sent one.
        msg: Option<String>,
    },
    /// A generic netlink family this request needs is not in this kernel.
    #[error("generic netlink family {0:?} is not in this kernel")]
    NoFamily(String),
    /// The reply was not what the protocol allows.
    #[error("malformed netlink reply: {0}")]
    Malformed(String),
}

impl NlError {
    /// True when the kernel says the device does not implement the operation.
    pub fn unsupported(&self) -> bool {
        matches!(self, NlError::Kernel { errno, .. } if *errno == libc::EOPNOTSUPP || *errno == ENOTSUPP)
    }
}

/// Linux's internal ENOTSUPP (524), which some drivers leak to user space.
const ENOTSUPP: i32 = 524;

fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EOPNOTSUPP => "EOPNOTSUPP (the device does not implement this)",
        ENOTSUPP => "ENOTSUPP (the device does not implement this)",
        libc::ENODEV => "ENODEV (no such device)",
        libc::EPERM => "EPERM (not permitted: run as root or with CAP_NET_ADMIN)",
        libc::EINVAL => "EINVAL (invalid argument)",
        libc::ENOENT => "ENOENT (not found)",
        _ => {
            return format!(
                "errno {errno} ({})",
                std::io::Error::from_raw_os_error(errno)
            )
        }
    };
    name.to_string()
}

/// Builds netlink messages: header, fixed family header, attributes (nested ones by index).
#[derive(Debug, Clone)]
pub struct MsgBuilder {
    buf: Vec<u8>,
    open: Vec<usize>,
}

impl MsgBuilder {
    /// A message of `msg_type` with `flags` (NLM_F_REQUEST and NLM_F_ACK are added) whose
    /// family header is `fixed`.
    pub fn new(msg_type: u16, flags: u16, fixed: &[u8]) -> Self {
        let mut buf = vec![0u8; 16];
        buf[4..6].copy_from_slice(&msg_type.to_ne_bytes());
        buf[6..8].copy_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        buf.extend_from_slice(fixed);
        pad(&mut buf);
        MsgBuilder {
            buf,
            open: Vec::new(),
        }
    }

    /// A generic netlink message: `family` id, command and version.
    pub fn genl(family: u16, cmd: u8, version: u8, flags: u16) -> Self {
        Self::new(family, flags, &[cmd, version, 0, 0])
    }

    /// Appends an attribute.
    pub fn attr(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        let len = 4 + value.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        pad(&mut self.buf);
        self
    }

    /// Appends a NUL-terminated string attribute.
    pub fn attr_str(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        self.attr(kind, &v)
    }

    /// Opens a nested attribute; close it with [`MsgBuilder::end_nest`].
    pub fn nest(&mut self, kind: u16) -> &mut Self {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&[0, 0]);
        self.buf
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }

    /// Closes the innermost nested attribute.
    pub fn end_nest(&mut self) -> &mut Self {
        if let Some(at) = self.open.pop() {
            let len = (self.buf.len() - at) as u16;
            self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    /// The finished message with sequence number `seq`.
    pub fn finish(&self, seq: u32) -> Vec<u8> {
        let mut b = self.buf.clone();
        let len = b.len() as u32;
        b[0..4].copy_from_slice(&len.to_ne_bytes());
        b[8..12].copy_from_slice(&seq.to_ne_bytes());
        b
    }
}

fn pad(buf: &mut Vec<u8>) {
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// One message of a reply: its type and the bytes after the netlink header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    /// `nlmsg_type`.
    pub msg_type: u16,
    /// Payload (family header, then attributes).
    pub payload: &'a [u8],
}

/// Splits the raw reply datagrams of one request into its data messages. An error message
/// with a non-zero code becomes [`NlError::Kernel`]; ACKs and DONE are dropped.
pub fn split_replies(raw: &[u8]) -> Result<Vec<Reply<'_>>, NlError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < raw.len() {
        let rest = &raw[at..];
        let msg = NetlinkBuffer::new_checked(rest)
            .map_err(|e| NlError::Malformed(format!("message at byte {at}: {e}")))?;
        let len = msg.length() as usize;
        let msg_type = msg.message_type();
        let flags = msg.flags();
        let payload = &rest[16..len];
        match msg_type {
            NLMSG_ERROR => {
                let eb = ErrorBuffer::new_checked(payload)
                    .map_err(|e| NlError::Malformed(format!("error message: {e}")))?;
                if let Some(code) = eb.code() {
                    let errno = -code.get();
                    return Err(NlError::Kernel {
                        errno,
                        msg: ext_ack_msg(payload, flags),
                    });
                }
            }
            NLMSG_DONE => {}
            _ => out.push(Reply { msg_type, payload }),
        }
        at += (len + 3) & !3;
    }
    Ok(out)
}

/// The extended-ACK message of an error payload, when the kernel attached one.
fn ext_ack_msg(payload: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 || payload.len() < 20 {
        return None;
    }
    let orig_len = u32::from_ne_bytes(payload[4..8].try_into().ok()?) as usize;
    let skip = if flags & NLM_F_CAPPED != 0 {
        16
    } else {
        orig_len
    };
    let tlvs = payload.get(4 + ((skip + 3) & !3)..)?;
    let attrs = Attrs::parse(tlvs).ok()?;
    attrs.string(NLMSGERR_ATTR_MSG).ok().flatten()
}

/// The attributes of one message or nest, by type (the last one wins on duplicates, except
/// through [`Attrs::all`]).
#[derive(Debug, Clone, Default)]
pub struct Attrs<'a> {
    list: Vec<(u16, &'a [u8])>,
    by_kind: BTreeMap<u16, &'a [u8]>,
}

impl<'a> Attrs<'a> {
    /// Walks an attribute list.
    pub fn parse(buf: &'a [u8]) -> Result<Self, NlError> {
        let mut a = Attrs::default();
        for nla in NlasIterator::new(buf) {
            let nla: NlaBuffer<&'a [u8]> =
                nla.map_err(|e| NlError::Malformed(format!("attribute: {e}")))?;
            let kind = nla.kind() & NLA_TYPE_MASK;
            let len = nla.length() as usize;
            let inner: &'a [u8] = nla.into_inner();
            let value = inner
                .get(4..len)
                .ok_or_else(|| NlError::Malformed(format!("attribute {kind} length {len}")))?;
            a.list.push((kind, value));
            a.by_kind.insert(kind, value);
        }
        Ok(a)
    }

    /// The raw value of attribute `kind`.
    pub fn get(&self, kind: u16) -> Option<&'a [u8]> {
        self.by_kind.get(&kind).copied()
    }

    /// Every attribute of type `kind`, in order.
    pub fn all(&self, kind: u16) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.list
            .iter()
            .filter(move |(k, _)| *k == kind)
            .map(|(_, v)| *v)
    }

    /// True when a flag attribute is present.
    pub fn flag(&self, kind: u16) -> bool {
        self.by_kind.contains_key(&kind)
    }

    /// A u8 attribute.
    pub fn u8(&self, kind: u16) -> Result<Option<u8>, NlError> {
        self.fixed::<1>(kind).map(|o| o.map(|b| b[0]))
    }

    /// A u16 attribute (host order).
    pub fn u16(&self, kind: u16) -> Result<Option<u16>, NlError> {
        self.fixed::<2>(kind).map(|o| o.map(u16::from_ne_bytes))
    }

    /// A u32 attribute (host order).
    pub fn u32(&self, kind: u16) -> Result<Option<u32>, NlError> {
        self.fixed::<4>(kind).map(|o| o.map(u32::from_ne_bytes))
    }

    /// A u64 attribute (host order).
    pub fn u64(&self, kind: u16) -> Result<Option<u64>, NlError> {
        self.fixed::<8>(kind).map(|o| o.map(u64::from_ne_bytes))
    }

    /// A NUL-terminated string attribute.
    pub fn string(&self, kind: u16) -> Result<Option<String>, NlError> {
        Ok(self.get(kind).map(|v| {
            let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
            String::from_utf8_lossy(&v[..end]).into_owned()
        }))
    }

    /// A nested attribute's attributes.
    pub fn nested(&self, kind: u16) -> Result<Option<Attrs<'a>>, NlError> {
        self.get(kind).map(Attrs::parse).transpose()
    }

    fn fixed<const N: usize>(&self, kind: u16) -> Result<Option<[u8; N]>, NlError> {
        match self.get(kind) {
            None => Ok(None),
            Some(v) => {
                v.get(..N)
                    .and_then(|s| s.try_into().ok())
                    .map(Some)
                    .ok_or(NlError::Malformed(format!(
                        "attribute {kind}: {} bytes, expected {N}",
                        v.len()
                    )))
            }
        }
    }
}

/// How long a request waits for the kernel's next reply datagram.
const RECV_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Bounds each `recv` so a reply that never comes is an error, not a hang.
fn set_recv_timeout(s: &Socket, d: std::time::Duration) -> Result<(), NlError> {
    use std::os::fd::AsRawFd;
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt on an open socket with a valid timeval of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(NlError::Io(format!(
            "SO_RCVTIMEO: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// Which netlink protocol a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// rtnetlink (links, DCB).
    Route,
    /// Generic netlink (ethtool, netdev).
    Generic,
}

/// A pair of netlink sockets, and optionally a record of every reply for `--dump-netlink`.
pub struct Netlink {
    route: Option<Socket>,
    generic: Option<Socket>,
    seq: u32,
    families: BTreeMap<String, Result<u16, NlError>>,
    /// (name, raw reply) of every request made, when recording.
    pub recorded: Option<Vec<(String, Vec<u8>)>>,
}

impl Netlink {
    /// A client; sockets open on first use.
    pub fn new(record: bool) -> Self {
        Netlink {
            route: None,
            generic: None,
            seq: 1,
            families: BTreeMap::new(),
            recorded: record.then(Vec::new),
        }
    }

    fn socket(&mut self, proto: Proto) -> Result<&Socket, NlError> {
        let slot = match proto {
            Proto::Route => &mut self.route,
            Proto::Generic => &mut self.generic,
        };
        if slot.is_none() {
            let p = match proto {
                Proto::Route => protocols::NETLINK_ROUTE,
                Proto::Generic => protocols::NETLINK_GENERIC,
            };
            let mut s = Socket::new(p).map_err(|e| NlError::Io(e.to_string()))?;
            s.bind_auto().map_err(|e| NlError::Io(e.to_string()))?;
            s.connect(&SocketAddr::new(0, 0))
                .map_err(|e| NlError::Io(e.to_string()))?;
            // Best effort: older kernels answer without extended ACKs.
            let _ = s.set_ext_ack(true);
            let _ = s.set_cap_ack(true);
            set_recv_timeout(&s, RECV_TIMEOUT)?;
            *slot = Some(s);
        }
        slot.as_ref()
            .ok_or_else(|| NlError::Io("socket not open".into()))
    }

    /// Sends `msg` and returns every reply datagram up to the final ACK, error or DONE,
    /// concatenated (the form [`split_replies`] and the fixtures take).
    pub fn request(
        &mut self,
        name: &str,
        proto: Proto,
        msg: &MsgBuilder,
    ) -> Result<Vec<u8>, NlError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = msg.finish(seq);
        let dump = u16::from_ne_bytes([bytes[6], bytes[7]]) & NLM_F_DUMP == NLM_F_DUMP;
        let sock = self.socket(proto)?;
        sock.send(&bytes, 0)
            .map_err(|e| NlError::Io(e.to_string()))?;
        let mut raw = Vec::new();
        'recv: for _ in 0..10_000 {
            let (dgram, _) = sock.recv_from_full().map_err(|e| {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) {
                    NlError::Io(format!("no reply from the kernel within {RECV_TIMEOUT:?}"))
                } else {
                    NlError::Io(e.to_string())
                }
            })?;
            let mut at = 0;
            while at + 16 <= dgram.len() {
                let msg = NetlinkBuffer::new_checked(&dgram[at..])
                    .map_err(|e| NlError::Malformed(e.to_string()))?;
                let len = msg.length() as usize;
                let mine = msg.sequence_number() == seq;
                let t = msg.message_type();
                if mine {
                    raw.extend_from_slice(&dgram[at..at + len]);
                    while raw.len() % 4 != 0 {
                        raw.push(0);
                    }
                    // An error ends any request; for a dump the DONE does, for a plain get
                    // the ACK (an error message with code 0) does.
                    if t == NLMSG_ERROR || (dump && t == NLMSG_DONE) {
                        break 'recv;
                    }
                }
                at += (len + 3) & !3;
            }
        }
        if let Some(rec) = self.recorded.as_mut() {
            rec.push((name.to_string(), raw.clone()));
        }
        Ok(raw)
    }

    /// The id of generic netlink family `name` (looked up once).
    pub fn family(&mut self, name: &str) -> Result<u16, NlError> {
        if let Some(r) = self.families.get(name) {
            return r.clone();
        }
        let mut m = MsgBuilder::genl(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 0);
        m.attr_str(CTRL_ATTR_FAMILY_NAME, name);
        let r = self
            .request(&format!("genl-family-{name}"), Proto::Generic, &m)
            .and_then(|raw| parse_family_id(&raw, name));
        self.families.insert(name.to_string(), r.clone());
        r
    }
}

/// The family id in a CTRL_CMD_GETFAMILY reply; ENOENT means the family does not exist.
pub fn parse_family_id(raw: &[u8], name: &str) -> Result<u16, NlError> {
    let replies = match split_replies(raw) {
        Err(NlError::Kernel { errno, .. }) if errno == libc::ENOENT => {
            return Err(NlError::NoFamily(name.to_string()))
        }
        r => r?,
    };
    let r = replies
        .first()
        .ok_or_else(|| NlError::Malformed("no reply to GETFAMILY".into()))?;
    let attrs = Attrs::parse(genl_attrs(r.payload)?)?;
    attrs
        .u16(CTRL_ATTR_FAMILY_ID)?
        .ok_or_else(|| NlError::Malformed("GETFAMILY reply without a family id".into()))
}

/// The attributes of a generic netlink payload (after the 4-byte genl header).
pub fn genl_attrs(payload: &[u8]) -> Result<&[u8], NlError> {
    payload
        .get(4..)
        .ok_or_else(|| NlError::Malformed("generic netlink message shorter than its header".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_frames_nested_attributes() {
        let mut m = MsgBuilder::genl(0x20, 4, 1, 0);
        m.nest(1).attr_str(2, "veth0").end_nest();
        let b = m.finish(7);
        assert_eq!(
            u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 7);
        let attrs = Attrs::parse(&b[20..]).unwrap();
        let inner = attrs.nested(1).unwrap().unwrap();
        assert_eq!(inner.string(2).unwrap().as_deref(), Some("veth0"));
    }

    #[test]
    fn odd_replies_are_errors_not_panics() {
        // Length field larger than the buffer.
        let mut b = vec![0u8; 20];
        b[0..4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(matches!(split_replies(&b), Err(NlError::Malformed(_))));
        // An attribute whose length runs past its buffer.
        assert!(Attrs::parse(&[0x20, 0, 1, 0, 0]).is_err());
        // A u32 attribute of two bytes.
        let a = Attrs::parse(&[6, 0, 3, 0, 1, 2, 0, 0]).unwrap();
        assert!(a.u32(3).is_err());
        assert_eq!(a.u16(3).unwrap(), Some(u16::from_ne_bytes([1, 2])));
        // Every prefix of a valid message parses or fails cleanly.
        let mut m = MsgBuilder::genl(0x20, 4, 1, 0);
        m.nest(1).attr_str(2, "veth0").end_nest();
        let full = m.finish(1);
        for n in 0..full.len() {
            let _ = split_replies(&full[..n]);
            let _ = Attrs::parse(&full[20.min(n)..n]);
        }
    }
}
