use crate::Vendor;

/// Why a switch's configuration could not be rendered or compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The plan holds something this vendor cannot be configured with.
    #[error("switch {switch}: {vendor} cannot express {item}: {why}")]
    Unexpressible {
        switch: String,
        vendor: Vendor,
        item: String,
        why: String,
    },
    /// The running configuration could not be read.
    #[error("switch {switch}: running {vendor} configuration, line {line}: {message}")]
    Parse {
        switch: String,
        vendor: Vendor,
        line: usize,
        message: String,
    },
    /// A template failed; a bug in mltctl, not in the inventory.
    #[error("switch {switch}: template {template} failed: {message}")]
    Template {
        switch: String,
        template: String,
        message: String,
    },
}
