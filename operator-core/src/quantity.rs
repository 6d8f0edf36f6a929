//! Kubernetes quantities (`500m`, `0.5Gi`, `1e3`) read exactly, as integers of nano-units: the
//! one parser for CPU and memory figures and for comparing what we applied with what the API
//! server returns (it stores `1000m` as `1` and `0.5Gi` as `512Mi`).

fn suffix_multiplier(suffix: &str) -> Option<i128> {
    const NANO: i128 = 1_000_000_000;
    let binary = |p: u32| Some((1i128 << p) * NANO);
    match suffix {
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        "n" => Some(1),
        "u" => Some(1_000),
        "m" => Some(1_000_000),
        "" => Some(NANO),
        "k" => Some(1_000 * NANO),
        "M" => Some(1_000_000 * NANO),
        "G" => Some(1_000_000_000 * NANO),
        "T" => Some(1_000_000_000_000 * NANO),
        "P" => Some(1_000_000_000_000_000 * NANO),
        "E" => Some(1_000_000_000_000_000_000 * NANO),
        _ => exponent_multiplier(suffix),
    }
}

/// `e3`, `E-2`: a decimal exponent.
fn exponent_multiplier(suffix: &str) -> Option<i128> {
    let exp: i32 = suffix.strip_prefix(['e', 'E'])?.parse().ok()?;
    let nano_exp = u32::try_from(exp + 9).ok()?;
    10i128.checked_pow(nano_exp)
}

/// The value of `q` in nano-units (10^-9; the finest a quantity can say), `None` when it is
/// not a quantity or too large.
pub fn nanos(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (negative, number) = match number.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) || frac.len() > 18 {
        return None;
    }
    let digits: i128 = format!("{int}{frac}").parse().ok()?;
    let scaled = digits.checked_mul(suffix_multiplier(suffix)?)? / 10i128.pow(frac.len() as u32);
    Some(if negative { -scaled } else { scaled })
}

/// `a` and `b` are quantities of the same value (`None` if either is not a quantity).
pub fn same_value(a: &str, b: &str) -> Option<bool> {
    Some(nanos(a)? == nanos(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_api_server_canonicalises_is_the_same_value() {
        for (a, b) in [
            ("1000m", "1"),
            ("0.5Gi", "512Mi"),
            ("1e3", "1k"),
            ("1.5", "1500m"),
            ("128Mi", "134217728"),
            ("0.125Gi", "128Mi"),
            ("100M", "1e8"),
            ("10m", "0.01"),
        ] {
            assert_eq!(same_value(a, b), Some(true), "{a} vs {b}");
        }
    }

    #[test]
    fn different_values_and_non_quantities_are_not_the_same() {
        assert_eq!(same_value("1", "2"), Some(false));
        assert_eq!(same_value("1Gi", "1G"), Some(false));
        assert_eq!(same_value("500m", "0.4"), Some(false));
        assert_eq!(same_value("abc", "1"), None);
        assert_eq!(same_value("1x", "1"), None);
        assert_eq!(same_value("", "0"), None);
        assert_eq!(same_value(".", "0"), None);
    }
}
