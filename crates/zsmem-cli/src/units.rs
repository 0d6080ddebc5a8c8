//! Parsing of sizes such as `4096`, `4K`, `16KiB`, `64k`, and the memory
//! limit a size an option asks for is held to.

/// Parse a byte size: a number with an optional K/KiB/M/MiB/G/GiB suffix
/// (binary multiples, case-insensitive).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (examples: 4096, 16K, 64KiB)"))?;
    let mult: usize = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size suffix `{other}` in `{s}`: use K, M or G"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size `{s}` is too large"))
}

/// `Ok` when `need` bytes fit in `limit` (half the memory available:
/// `zsmem_lab::corpus::default_input_limit`, the limit `--input` has), else
/// the error that `option` (as the user gave it, e.g. `--live 4096`) asks
/// for `what`. Every option that sizes memory up front is held to it here.
pub fn within_memory(option: &str, need: u128, what: &str, limit: u64) -> crate::CliResult {
    if need <= u128::from(limit) {
        return Ok(());
    }
    Err(crate::CliError::Usage(format!(
        "{option}: about {} MiB of {what}, more than the {} MiB allowed (half the memory available)",
        need >> 20,
        limit >> 20
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16K"), Ok(16384));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("").is_err());
    }
}
