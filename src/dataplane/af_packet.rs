//! AF_PACKET port (through pnet's datalink): the fallback where AF_XDP is refused. It copies
//! each frame between the kernel and the worker's pool, one syscall per frame.

use std::{io, os::fd::RawFd, time::Duration};

use pnet::datalink::{self, Channel, DataLinkReceiver, DataLinkSender};

use super::{
    pool::{Frame, FramePool},
    port::{iface_mac, Port, PortError, RxFrame},
};
use crate::wire::MacAddr;

/// A packet socket on one interface.
pub struct AfPacketPort {
    name: String,
    mac: MacAddr,
    fd: RawFd,
    tx: Box<dyn DataLinkSender>,
    rx: Box<dyn DataLinkReceiver>,
}

fn packet_socket() -> io::Result<RawFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2)/setsockopt(2) calls with valid arguments.
    unsafe {
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto));
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Our own transmissions must not come back as receptions.
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            23, // PACKET_IGNORE_OUTGOING
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        Ok(fd)
    }
}

impl AfPacketPort {
    /// Opens a promiscuous packet socket on `iface`.
    pub fn open(iface: &str, _pool: &mut FramePool) -> Result<Self, PortError> {
        let err = |reason: String| PortError::Open {
            backend: "AF_PACKET",
            iface: iface.to_string(),
            queue: 0,
            reason,
        };
        let ni = datalink::interfaces()
            .into_iter()
            .find(|i| i.name == iface)
            .ok_or_else(|| err("no such interface".into()))?;
        let fd = packet_socket().map_err(|e| err(e.to_string()))?;
        let config = datalink::Config {
            read_timeout: Some(Duration::ZERO),
            socket_fd: Some(fd),
            promiscuous: true,
            ..Default::default()
        };
        let (tx, rx) = match datalink::channel(&ni, config) {
            Ok(Channel::Ethernet(tx, rx)) => (tx, rx),
            Ok(_) => return Err(err("unexpected channel type".into())),
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(AfPacketPort {
            name: iface.to_string(),
            mac: iface_mac(iface).unwrap_or_default(),
            fd,
            tx,
            rx,
        })
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn recv(
        &mut self,
        pool: &mut FramePool,
        out: &mut Vec<RxFrame>,
        max: usize,
        now: u64,
    ) -> Result<usize, PortError> {
        let mut n = 0;
        while n < max {
            let bytes = match self.rx.next() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => break,
                Err(e) => {
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        source: e,
                    })
                }
            };
            let Some(idx) = pool.alloc() else { break };
            let buf = pool.buf_mut(idx);
            let len = bytes.len().min(buf.len());
            buf[..len].copy_from_slice(&bytes[..len]);
            out.push(RxFrame {
                frame: Frame {
                    idx,
                    len: len as u32,
                },
                rx_ns: now,
            });
            n += 1;
        }
        Ok(n)
    }

    fn tx_room(&mut self) -> usize {
        usize::MAX
    }

    fn send(&mut self, pool: &mut FramePool, frames: &[Frame]) -> Result<usize, PortError> {
        for f in frames {
            let res = self.tx.send_to(pool.data(*f), None);
            pool.release(f.idx);
            if let Some(Err(e)) = res {
                if e.raw_os_error() != Some(libc::ENOBUFS) {
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        source: e,
                    });
                }
            }
        }
        Ok(frames.len())
    }

    fn reclaim(&mut self, _pool: &mut FramePool) -> Result<(), PortError> {
        Ok(())
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
}
