//! Configuration: parse TOML text into a Plan; a Plan must print back to TOML
//! (`lossless_fuzz::plan_to_toml`) that parses to the same Plan.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lossless_fuzz::check_config_round_trip(data));
