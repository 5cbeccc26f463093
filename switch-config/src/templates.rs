//! The tera templates under `templates/switch/`, compiled into the binary so that
//! rendering does not depend on where mltctl runs from.

use std::sync::OnceLock;

use serde::Serialize;
use tera::Tera;

use crate::Error;

macro_rules! templates {
    ($($name:literal),+ $(,)?) => {
        &[$(($name, include_str!(concat!("../../templates/switch/", $name)))),+]
    };
}

const TEMPLATES: &[(&str, &str)] = templates![
    "eos/config.tera",
    "onyx/config.tera",
    "cumulus/config.tera",
    "sonic/config.tera",
];

fn engine() -> &'static Tera {
    static ENGINE: OnceLock<Tera> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut tera = Tera::default();
        tera.add_raw_templates(TEMPLATES.iter().copied())
            .expect("the built-in switch templates parse");
        tera
    })
}

/// Renders built-in template `name` for switch `switch`.
pub fn render(switch: &str, name: &str, context: &impl Serialize) -> Result<String, Error> {
    let failed = |message: String| Error::Template {
        switch: switch.to_string(),
        template: name.to_string(),
        message,
    };
    let context = tera::Context::from_serialize(context).map_err(|e| failed(chain(&e)))?;
    let text = engine()
        .render(name, &context)
        .map_err(|e| failed(chain(&e)))?;
    // Templates start each line with its newline; an absent title leaves one in front.
    Ok(text.trim_start_matches('\n').to_string())
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
