//! Reading and comparing GSM8K answers.
//!
//! A GSM8K answer is a worked solution whose last line is `#### N`. Agents submit numbers in
//! many harmless spellings (`$1,200`, ` 72 `, `72.0`, `#### 72`); all of them count, while
//! anything that is not a plain number does not.

/// The text after the last `####` of a GSM8K answer, trimmed; `None` when there is no `####`.
pub fn final_answer(answer: &str) -> Option<&str> {
    answer
        .rfind("####")
        .map(|at| answer[at + "####".len()..].trim())
}

/// The canonical spelling of a number, so equal numbers compare equal as strings.
///
/// `$`, commas, whitespace and a leading `+` are dropped, leading zeros of the integer part and
/// trailing zeros of the fraction go (`"1,234.50"` → `"1234.5"`, `"72.0"` → `"72"`). `None`
/// when what remains is not a decimal number.
pub fn normalize(raw: &str) -> Option<String> {
    let cleaned: String = raw
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ',' && *c != '$')
        .collect();
    let (negative, unsigned) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, cleaned.strip_prefix('+').unwrap_or(&cleaned)),
    };
    let (int_part, frac_part) = match unsigned.split_once('.') {
        Some((i, f)) => (i, f),
        None => (unsigned, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return None;
    }
    let int_part = match int_part.trim_start_matches('0') {
        "" => "0",
        digits => digits,
    };
    let frac_part = frac_part.trim_end_matches('0');
    let mut out = String::with_capacity(int_part.len() + frac_part.len() + 2);
    // "-0" and "-0.0" are zero, not a distinct answer.
    if negative && (int_part != "0" || !frac_part.is_empty()) {
        out.push('-');
    }
    out.push_str(int_part);
    if !frac_part.is_empty() {
        out.push('.');
        out.push_str(frac_part);
    }
    Some(out)
}

/// The last number written in free text (`"so she has $1,200 left."` → `"$1,200"`): what a
/// plain-text answer is graded on. `None` when the text has no digit.
pub fn last_number(text: &str) -> Option<&str> {
    let is_part = |c: char| c.is_ascii_digit() || matches!(c, ',' | '.' | '$' | '-' | '+');
    let end = text.rfind(|c: char| c.is_ascii_digit())? + 1;
    let start = text[..end].rfind(|c: char| !is_part(c)).map_or(0, |i| {
        i + text[i..].chars().next().map_or(1, char::len_utf8)
    });
    Some(text[start..end].trim_start_matches([',', '.']))
}

/// Whether a submitted answer equals the expected number (given in canonical form, see
/// [`normalize`]). A submission may itself end in `#### N`; then only `N` counts.
pub fn is_correct(submitted: &str, expected: &str) -> bool {
    let submitted = final_answer(submitted).unwrap_or(submitted);
    normalize(submitted).is_some_and(|n| n == expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_number_is_the_last_numeral_of_free_text() {
        assert_eq!(last_number("So she has $1,200 left."), Some("$1,200"));
        assert_eq!(last_number("18 - 3 = 15, so the answer is 15"), Some("15"));
        assert_eq!(last_number("It is -4.5 degrees"), Some("-4.5"));
        assert_eq!(last_number("café 7"), Some("7"));
        assert_eq!(last_number("no numbers"), None);
        assert!(is_correct(
            last_number("The total is 1,234.").unwrap_or(""),
            "1234"
        ));
    }

    #[test]
    fn final_answer_is_after_the_last_marker() {
        let answer = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72";
        assert_eq!(final_answer(answer), Some("72"));
        assert_eq!(final_answer("a #### 1\nb\n####  1,000 \n"), Some("1,000"));
        assert_eq!(final_answer("no marker here"), None);
    }

    #[test]
    fn normalize_accepts_harmless_spellings() {
        for (raw, want) in [
            ("72", "72"),
            (" 72 ", "72"),
            ("$72", "72"),
            ("$ 1,234", "1234"),
            ("1 234", "1234"),
            ("72.0", "72"),
            ("72.00", "72"),
            ("72.", "72"),
            ("0072", "72"),
            ("+5", "5"),
            ("-5", "-5"),
            ("-0", "0"),
            ("0.50", "0.5"),
            (".5", "0.5"),
            ("1,234.50", "1234.5"),
            ("0", "0"),
        ] {
            assert_eq!(normalize(raw).as_deref(), Some(want), "{raw:?}");
        }
    }

    #[test]
    fn normalize_rejects_non_numbers() {
        for raw in [
            "",
            " ",
            "$",
            ".",
            "abc",
            "72 dollars",
            "7e2",
            "1.2.3",
            "--5",
            "½",
            "٧٢",
        ] {
            assert_eq!(normalize(raw), None, "{raw:?}");
        }
    }

    #[test]
    fn is_correct_compares_numbers_not_spellings() {
        assert!(is_correct("72", "72"));
        assert!(is_correct("$72.00", "72"));
        assert!(is_correct("1,200", "1200"));
        assert!(is_correct("The total is #### 1,200", "1200"));
        assert!(is_correct("-3", "-3"));
        assert!(!is_correct("73", "72"));
        assert!(!is_correct("720", "72"));
        assert!(!is_correct("7.2", "72"));
        assert!(!is_correct("3", "-3"));
        assert!(!is_correct("seventy-two", "72"));
        assert!(!is_correct("", "72"));
    }
}
