//! On/off switches read from the environment (`COTENANT_TOKENS`, `COTENANT_STATUS`,
//! `COTENANT_TASK_HISTOGRAMS`): one reading of their values for all of them, so that each
//! accepts the same words and says the same thing about a value it does not understand.

/// Whether the value `value` of the variable `name` says on (`Ok(true)`) or off; the empty value
/// says on (a variable set to nothing asks for nothing to be turned off). `Err` names the
/// variable and the value that means neither.
pub(crate) fn parse(name: &str, value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "off" | "0" | "false" | "no" => Ok(false),
        "on" | "1" | "true" | "yes" | "" => Ok(true),
        other => Err(format!("{name}={other:?} is neither on nor off")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn on_and_off_in_any_case_and_spacing_and_a_clear_error_for_anything_else() {
        for on in ["on", "1", "TRUE", " yes ", ""] {
            assert_eq!(parse("V", on), Ok(true), "{on:?}");
        }
        for off in ["off", "0", "False", " No "] {
            assert_eq!(parse("V", off), Ok(false), "{off:?}");
        }
        assert_eq!(parse("COTENANT_X", "of").unwrap_err(), "COTENANT_X=\"of\" is neither on nor off");
    }
}
