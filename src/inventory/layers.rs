//! Layer-size files: one layer per line, `size` or `name size`, `#` starts a comment.
//!
//! A layer file is named by the inventory but may be any file the admin points at (a
//! mistake can point at a secret), so problems give its line and column and never
//! quote its text.

use marked_yaml::Marker;

use super::Layer;
use crate::diag::Reporter;

/// Parses a layer file registered as `source`; every bad line is reported.
pub fn parse_layer_file(text: &str, source: usize, report: &mut Reporter) -> Vec<Layer> {
    let mut layers = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let content = line.split('#').next().unwrap_or("");
        let fields: Vec<&str> = content.split_whitespace().collect();
        let (name, size) = match fields.as_slice() {
            [] => continue,
            [size] => (format!("layer{}", layers.len()), *size),
            [name, size] => (name.to_string(), *size),
            _ => {
                let column = line.len() - line.trim_start().len() + 1;
                report.error_at(
                    Marker::new(source, 0, index + 1, column),
                    "expected `size` or `name size` on each line",
                );
                continue;
            }
        };
        match size.parse::<u64>() {
            Ok(params) if params > 0 && valid_layer_name(&name) => {
                layers.push(Layer { name, params })
            }
            Ok(params) if params > 0 => report.error_at(
                Marker::new(
                    source,
                    0,
                    index + 1,
                    line.len() - line.trim_start().len() + 1,
                ),
                "a layer name may hold only letters, digits and `-_.:/()[]`, up to 128 of them",
            ),
            _ => {
                // The size is the last field, so the rightmost match is its position.
                let column = content.rfind(size).unwrap_or(0) + 1;
                report.error_at(
                    Marker::new(source, 0, index + 1, column),
                    "not a layer size (a whole number of parameters above 0)",
                );
            }
        }
    }
    layers
}

/// Layer names are printed (`plan --explain`), so they hold no control characters or
/// anything a terminal would act on.
fn valid_layer_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/()[]".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_sizes_and_comments() {
        let mut report = Reporter::default();
        let src = report.add_source(Path::new("m.layers"));
        let text = "# vgg\nconv1 1792\n\n  38928  # unnamed\n";
        let layers = parse_layer_file(text, src, &mut report);
        assert!(!report.has_errors());
        assert_eq!(
            layers,
            vec![
                Layer {
                    name: "conv1".into(),
                    params: 1792
                },
                Layer {
                    name: "layer1".into(),
                    params: 38928
                },
            ]
        );
    }

    #[test]
    fn every_bad_line_is_reported() {
        let mut report = Reporter::default();
        let src = report.add_source(Path::new("m.layers"));
        parse_layer_file("conv1 12x\nfc 0\na b c\n", src, &mut report);
        assert_eq!(
            report.finish().to_string(),
            "m.layers:1:7: not a layer size (a whole number of parameters above 0)\n\
             m.layers:2:4: not a layer size (a whole number of parameters above 0)\n\
             m.layers:3:1: expected `size` or `name size` on each line\n"
        );
    }
}
