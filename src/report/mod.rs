//! Reports read the plan and the measurements: statistics, the terminal table, the JSON results.

pub mod compare;
pub mod html;
pub mod json;
pub mod lesson;
pub mod roofline;
pub mod stats;
pub mod table;
pub mod trace;
