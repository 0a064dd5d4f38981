//! Strings a worker sends at registration are stored and shown to every user (`tunehub
//! workers`, logs): one holding a control character would reach their terminals raw, and
//! `ESC[2J` in a device id clears the screen of whoever lists the fleet (issue 64). Such a
//! string is refused at the door, naming the field; the command line also escapes what it
//! prints, as a second line of defence.

use serde_json::Value;

/// `Err` naming `what` and the first control character (C0, DEL or C1) in `value`.
pub fn check_printable(what: &str, value: &str) -> Result<(), String> {
    match value.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(format!(
            "{what} holds the control character '{}' at byte {at}: only printable text is \
             taken",
            c.escape_default()
        )),
        None => Ok(()),
    }
}

/// Every string of a JSON description (keys and values), each named by its path under `what`
/// (`target_json.features[2]`): a description's fields are checked without listing them, so a
/// field added later is checked too.
pub fn check_json_printable(what: &str, v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) => check_printable(what, s),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check_json_printable(&format!("{what}[{i}]"), item)),
        Value::Object(fields) => fields.iter().try_for_each(|(k, item)| {
            check_printable(&format!("a field name of {what}"), k)?;
            check_json_printable(&format!("{what}.{k}"), item)
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_refused_naming_the_field() {
        assert!(check_printable("device_id", "rack-3/host ü").is_ok());
        let e = check_printable("device_id", "a\x1b[2J").unwrap_err();
        assert!(e.contains("device_id") && e.contains("\\u{1b}"), "{e}");
        for c in ['\n', '\t', '\u{7f}', '\u{9b}'] {
            assert!(check_printable("x", &format!("a{c}")).is_err(), "{c:?}");
        }
        let v = serde_json::json!({"arch": "x86_64", "features": ["avx2", "fma\x07"]});
        let e = check_json_printable("target_json", &v).unwrap_err();
        assert!(e.starts_with("target_json.features[1] holds"), "{e}");
        let v = serde_json::json!({"cpu\x1b": 1});
        assert!(check_json_printable("target_json", &v).is_err());
    }
}
