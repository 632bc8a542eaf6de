//! One lossless process per interface: the lock an attach of our XDP program takes first.
//!
//! Attaching replaces whatever XDP program the interface holds, since a run that crashed
//! leaves its program behind (netlink attachments outlive their process) and it must go. A
//! running daemon's program is another matter: replacing it takes the daemon's traffic away
//! without a word (its sockets receive nothing more, its heartbeats and health checks go on),
//! and so would a `gen`, `sink` or second `run` started on its ports by mistake. So every
//! attach first takes an exclusive `flock` on a file named for the interface and holds it for
//! as long as the program is attached. The kernel releases a `flock` when its process ends,
//! however it ends: a crashed run's lock never outlives it, while its program may, which is
//! exactly the line between stale and in use.
//!
//! The file is named for the network namespace and the ifindex, not the interface's name:
//! names repeat across namespaces (every test's `d0`), an ifindex and a namespace's inode do
//! not while both live. It holds the holder's pid, for the error. Where no lock file can be
//! made (a `/run` this process may not write), the attach goes on unguarded, logged at debug.
//!
//! The holder removes the file when it lets go, still holding the lock, so the files do not
//! pile up (one per namespace and interface ever attached: thousands under the tests). That
//! opens one race, closed the usual way: a taker may have opened the file just before it was
//! removed and then win the lock on a file no longer anyone's path, while a third opens a new
//! one. So a taker that wins checks that the file it locked is still the one at the path, and
//! starts over if not. A crashed holder removes nothing; its file is taken as it is.

use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, Write},
    os::{fd::AsRawFd, unix::fs::MetadataExt},
    path::{Path, PathBuf},
};

/// Where the lock files live (the systemd unit's `RuntimeDirectory`).
const LOCK_DIR: &str = "/run/lossless";

/// The lock of one interface, held until dropped (which removes its file).
#[derive(Debug)]
pub struct IfaceLock {
    _file: File,
    path: PathBuf,
}

impl Drop for IfaceLock {
    fn drop(&mut self) {
        // Before the descriptor closes, so no one can lock this file at its path once it is
        // unlocked (see the module doc).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Another process holds the interface.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{iface} is in use by another lossless process{}: attaching would take its traffic \
     away; stop it first (or use other ports)",
    holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
)]
pub struct InUse {
    /// The interface.
    pub iface: String,
    /// The holder's pid, as it wrote it.
    pub holder: Option<u32>,
}

impl IfaceLock {
    /// Takes the lock of `iface` (index `ifindex` in this thread's network namespace):
    /// `Ok(None)` where no lock file can be made, [`InUse`] where another process holds it.
    pub fn take(iface: &str, ifindex: i32) -> Result<Option<IfaceLock>, InUse> {
        let Some(path) = lock_path(ifindex) else {
            return Ok(None);
        };
        Self::take_at(iface, &path)
    }

    fn take_at(iface: &str, path: &Path) -> Result<Option<IfaceLock>, InUse> {
        loop {
            if let Some(taken) = Self::try_take_at(iface, path) {
                return taken;
            }
        }
    }

    /// One attempt: `Ok(None)` inside the `Some` as [`IfaceLock::take`] says, `None` where the
    /// file locked was removed by its last holder meanwhile (try again).
    fn try_take_at(iface: &str, path: &Path) -> Option<Result<Option<IfaceLock>, InUse>> {
        let opened = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)
            });
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(iface, path = %path.display(), error = %e, "no interface lock");
                return Some(Ok(None));
            }
        };
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Some(Err(InUse {
                iface: iface.to_string(),
                holder: text.trim().parse().ok(),
            }));
        }
        if !still_at(&file, path) {
            return None;
        }
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| write!(file, "{}", std::process::id()));
        Some(Ok(Some(IfaceLock {
            _file: file,
            path: path.to_path_buf(),
        })))
    }
}

/// Whether `file` is the file at `path` (not one removed from it since it was opened).
fn still_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(f), Ok(p)) => f.dev() == p.dev() && f.ino() == p.ino(),
        _ => false,
    }
}

/// The process holding the lock of the interface of index `ifindex` in this thread's network
/// namespace, looked up without taking it: taking it to see would refuse a daemon starting at
/// that instant, and on a reload find the daemon being reloaded. The kernel lists every
/// `flock` in `/proc/locks` with its holder's pid and its file's device and inode. `None`
/// where no one holds it (no file, or a crashed holder's) or it cannot be told.
pub fn holder(ifindex: i32) -> Option<u32> {
    let meta = std::fs::metadata(lock_path(ifindex)?).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    flock_holder(&locks, meta.dev(), meta.ino())
}

/// The pid holding a `flock` on the file of device `dev` and inode `ino`, from the text of
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF`, the device as hex
/// major:minor; a process waiting for the lock has `->` after the id and holds nothing).
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let file = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            [_, "FLOCK", _, _, pid, at, ..] if *at == file => pid.parse().ok(),
            _ => None,
        }
    })
}

/// The lock file of interface `ifindex` in this thread's network namespace.
fn lock_path(ifindex: i32) -> Option<PathBuf> {
    let netns = std::fs::metadata("/proc/thread-self/ns/net").ok()?.ino();
    Some(PathBuf::from(LOCK_DIR).join(format!("xdp-{netns}-{ifindex}.lock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_read_from_the_kernels_list_without_taking_the_lock() {
        let path = std::env::temp_dir().join(format!("lossless-holder-{}", std::process::id()));
        let lock = IfaceLock::take_at("d0", &path)
            .unwrap()
            .expect("a lock file");
        let meta = std::fs::metadata(&path).unwrap();
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        assert_eq!(
            flock_holder(&locks, meta.dev(), meta.ino()),
            Some(std::process::id()),
            "{locks}"
        );
        // Still held by us: looking took nothing.
        assert!(IfaceLock::take_at("d0", &path).is_err());
        drop(lock);
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        assert_eq!(flock_holder(&locks, meta.dev(), meta.ino()), None);
        // A waiter holds nothing; another kind of lock or file is not ours.
        let dev = libc::makedev(0, 0x1a);
        let text = "1: FLOCK  ADVISORY  WRITE 77 00:1a:5678 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 78 00:1a:5679 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 79 00:1a:5680 0 EOF\n";
        assert_eq!(flock_holder(text, dev, 5678), Some(77));
        assert_eq!(flock_holder(text, dev, 5679), None);
        assert_eq!(flock_holder(text, dev, 5680), None);
        assert_eq!(flock_holder(text, dev, 1), None);
    }

    #[test]
    fn a_second_taker_is_refused_until_the_first_lets_go() {
        let path = std::env::temp_dir().join(format!("lossless-lock-{}", std::process::id()));
        let first = IfaceLock::take_at("d0", &path)
            .unwrap()
            .expect("a lock file");
        // A second open file description conflicts even within one process.
        let refused = IfaceLock::take_at("d0", &path).unwrap_err();
        assert_eq!(
            refused,
            InUse {
                iface: "d0".into(),
                holder: Some(std::process::id()),
            }
        );
        assert!(refused
            .to_string()
            .contains("d0 is in use by another lossless process (pid"));
        drop(first);
        assert!(!path.exists(), "the holder removes its file");
        let again = IfaceLock::take_at("d0", &path).unwrap();
        assert!(again.is_some());
        drop(again);
        assert!(!path.exists());
    }

    /// A taker that opened the file just before its holder removed it and let go holds a lock
    /// on a file no longer at the path: it must not count (a third taker would make a new file
    /// and lock that too).
    #[test]
    fn a_lock_on_a_removed_file_is_not_taken_for_the_interface() {
        let path = std::env::temp_dir().join(format!("lossless-lock-gone-{}", std::process::id()));
        let first = IfaceLock::take_at("d0", &path).unwrap().unwrap();
        let opened_before = File::open(&path).unwrap();
        assert!(still_at(&opened_before, &path));
        drop(first);
        assert!(!still_at(&opened_before, &path), "removed");
        let third = IfaceLock::take_at("d0", &path).unwrap().unwrap();
        assert!(!still_at(&opened_before, &path), "another file at the path");
        assert!(still_at(&third._file, &path));
    }
}
