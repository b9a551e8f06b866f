//! Reports read the plan and the measurements: statistics, the terminal table, the JSON results.

pub mod json;
pub mod stats;
pub mod table;
