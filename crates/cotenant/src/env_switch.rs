//! On/off switches read from the environment (`COTENANT_TOKENS`, `COTENANT_STATUS`,
//! `COTENANT_TASK_HISTOGRAMS`): one reading of their values for all of them, so that each
//! accepts the same words and says the same thing about a value it does not understand.

/// Whether the value `value` of the variable `name` says on (`Ok(true)`) or off. An empty (or
/// blank) value says nothing: `default`, what the switch is when the variable is not set (a
/// template that expands an unset variable to nothing must not flip a switch). `Err` names the
/// variable and the value that means neither.
pub(crate) fn parse(name: &str, value: &str, default: bool) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" => Ok(default),
        "off" | "0" | "false" | "no" => Ok(false),
        "on" | "1" | "true" | "yes" => Ok(true),
        _ => Err(format!("{name}={:?} is neither on nor off", value.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn on_and_off_in_any_case_and_spacing_and_a_clear_error_for_anything_else() {
        for on in ["on", "1", "TRUE", " yes "] {
            assert_eq!(parse("V", on, false), Ok(true), "{on:?}");
        }
        for off in ["off", "0", "False", " No "] {
            assert_eq!(parse("V", off, true), Ok(false), "{off:?}");
        }
        assert_eq!(parse("COTENANT_X", " Of ", true).unwrap_err(), "COTENANT_X=\"Of\" is neither on nor off");
    }

    #[test]
    fn an_empty_value_leaves_the_switch_as_it_is_by_default() {
        for empty in ["", "  "] {
            assert_eq!(parse("V", empty, true), Ok(true));
            assert_eq!(parse("V", empty, false), Ok(false));
        }
    }
}
