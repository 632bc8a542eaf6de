//! Compiles the XDP programs in `bpf/` with clang (through libbpf-cargo) into `OUT_DIR`;
//! the binaries embed the objects and load them with libbpf-rs at run time.
//!
//! - `bpf/lossless.bpf.c`: the steering program of the daemon and its tools;
//! - `bpf/xdp_drop.bpf.c`: a count-and-drop reference used only by the `lossless-bench`
//!   helper (bench/rx), never by the daemon.
use std::{env, path::PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Each BPF source and the object it compiles to in `OUT_DIR`.
const OBJECTS: [(&str, &str); 2] = [
    ("bpf/lossless.bpf.c", "lossless.bpf.o"),
    ("bpf/xdp_drop.bpf.c", "xdp_drop.bpf.o"),
];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH is set by cargo");
    // Debian keeps <asm/types.h> under the multiarch include directory.
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    for (src, obj) in OBJECTS {
        SkeletonBuilder::new()
            .source(src)
            .obj(out.join(obj))
            // -mcpu=v3: atomic fetch-and-add whose result is used (the ingress counters).
            .clang_args(["-O2", "-g", "-Wall", "-mcpu=v3", multiarch.as_str()])
            .build()
            .unwrap_or_else(|e| {
                panic!("compiling {src} failed (is clang installed? run scripts/setup): {e:#}")
            });
        println!("cargo:rerun-if-changed={src}");
    }
}
