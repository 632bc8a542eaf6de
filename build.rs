//! Compiles the XDP program in `bpf/` with clang (through libbpf-cargo) into `OUT_DIR`;
//! the daemon embeds the object and loads it with libbpf-rs at run time.
use std::{env, path::PathBuf};

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "bpf/lossless.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH is set by cargo");
    // Debian keeps <asm/types.h> under the multiarch include directory.
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    SkeletonBuilder::new()
        .source(SRC)
        .obj(out.join("lossless.bpf.o"))
        .clang_args(["-O2", "-g", "-Wall", multiarch.as_str()])
        .build()
        .unwrap_or_else(|e| {
            panic!("compiling {SRC} failed (is clang installed? run scripts/setup): {e:#}")
        });
    println!("cargo:rerun-if-changed={SRC}");
}
