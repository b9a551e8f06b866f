//! Words for messages and tables, a leaf that every layer may use (it imports nothing).

/// `n` and the noun, singular for 1: `count(1, "dispatch", "dispatches")` = "1 dispatch".
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}
