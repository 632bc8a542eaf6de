//! Headroom math (filled in by the calculator work).
