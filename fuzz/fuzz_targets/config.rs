//! Configuration: parse TOML text into a Plan; a Plan must print back to TOML
//! (`lossless_fuzz::plan_to_toml`) that parses to the same Plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lossless::config::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = Plan::parse(text, "fuzz.toml") else {
        return;
    };
    let again = lossless_fuzz::plan_to_toml(&plan);
    match Plan::parse(&again, "again.toml") {
        Ok(p) => assert_eq!(p, plan, "round trip changed the plan; printed:\n{again}"),
        Err(e) => panic!("the printed plan does not parse: {e}\n{again}"),
    }
});
