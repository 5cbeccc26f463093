//! The tera templates under `templates/switch/`, compiled into the binary so that
//! rendering does not depend on where mltctl runs from.

use std::sync::OnceLock;

use serde::Serialize;
use tera::Tera;

use crate::{Error, SwitchIntent};

macro_rules! templates {
    ($($name:literal),+ $(,)?) => {
        &[$(($name, include_str!(concat!("../../templates/switch/", $name)))),+]
    };
}

const TEMPLATES: &[(&str, &str)] =
    templates!["eos/config.tera", "onyx/config.tera", "cumulus/config.tera",];

fn engine() -> &'static Tera {
    static ENGINE: OnceLock<Tera> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut tera = Tera::default();
        tera.add_raw_templates(TEMPLATES.iter().copied())
            .expect("the built-in switch templates parse");
        tera.register_filter("sh", shell_word);
        tera
    })
}

/// `{{ value | sh }}`: one word for a shell (NVUE commands run through `sh`).
fn shell_word(
    value: &tera::Value,
    _: &std::collections::HashMap<String, tera::Value>,
) -> tera::Result<tera::Value> {
    let text = match value {
        tera::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(tera::Value::String(mlt_common::shell::quote(&text)))
}

/// Renders built-in template `name` for switch `switch`. A value holding a control
/// character is refused: every template line is one command, and a newline in a value
/// (a port name, a route read from a device) would add a line of its own.
pub fn render(
    intent: &SwitchIntent,
    name: &str,
    context: &impl Serialize,
) -> Result<String, Error> {
    let failed = |message: String| Error::Template {
        switch: intent.name.clone(),
        template: name.to_string(),
        message,
    };
    let value = serde_json::to_value(context).map_err(|e| failed(e.to_string()))?;
    if let Some(bad) = control_character(&value) {
        return Err(control_character_refused(intent, bad));
    }
    let context = tera::Context::from_value(value).map_err(|e| failed(chain(&e)))?;
    let text = engine()
        .render(name, &context)
        .map_err(|e| failed(chain(&e)))?;
    // Templates start each line with its newline; an absent title leaves one in front.
    Ok(text.trim_start_matches('\n').to_string())
}

/// An error naming the first of `words` that holds a control character, if one does.
pub fn refuse_control_characters<'w>(
    intent: &SwitchIntent,
    mut words: impl Iterator<Item = &'w str>,
) -> Result<(), Error> {
    match words.find(|w| w.contains(char::is_control)) {
        Some(bad) => Err(control_character_refused(intent, bad)),
        None => Ok(()),
    }
}

/// An error naming the first string in `value` (at any depth) that holds a control
/// character, if one does.
pub fn refuse_control_characters_in(
    intent: &SwitchIntent,
    value: &serde_json::Value,
) -> Result<(), Error> {
    match control_character(value) {
        Some(bad) => Err(control_character_refused(intent, bad)),
        None => Ok(()),
    }
}

fn control_character_refused(intent: &SwitchIntent, bad: &str) -> Error {
    crate::text::unexpressible(
        intent,
        format!("the value {}", mlt_common::redact::shown(bad)),
        "a control character cannot go into a configuration line",
    )
}

/// The first string in `value` that holds a control character.
fn control_character(value: &serde_json::Value) -> Option<&str> {
    match value {
        serde_json::Value::String(s) => s.contains(char::is_control).then_some(s.as_str()),
        serde_json::Value::Array(items) => items.iter().find_map(control_character),
        serde_json::Value::Object(fields) => fields
            .iter()
            .find_map(|(k, v)| control_character(v).or_else(|| control_character_key(k))),
        _ => None,
    }
}

fn control_character_key(key: &str) -> Option<&str> {
    key.contains(char::is_control).then_some(key)
}

/// Tera's own message is only "failed to render"; the cause is further down.
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}
