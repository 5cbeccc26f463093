//! Test and benchmark tooling, kept apart from the transport: network-namespace
//! fabrics and veth pairs ([`netns`]), and the benchmarks `endhost bench` runs
//! ([`bench`]).

pub mod bench;
pub mod netns;

use std::ffi::OsString;
use std::path::Path;

/// Debian's Python, which has python3-torch whatever python3 the PATH has first.
pub const PYTHON: &str = "/usr/bin/python3";

/// [`PYTHON`]'s arguments to run `script` in isolated mode (`-I`: no `PYTHON*`
/// variables, no user site, not even the script's directory on the path), with
/// `package` first on the path when given. Benches run scripts as root: nothing is
/// imported from anywhere but the system's site and what they name.
pub fn isolated_python(script: &Path, package: Option<&Path>) -> Vec<OsString> {
    const RUN: &str = "import runpy, sys; package = sys.argv[1]; sys.argv = sys.argv[2:]; \
                       package and sys.path.insert(0, package); \
                       runpy.run_path(sys.argv[0], run_name='__main__')";
    vec![
        "-I".into(),
        "-c".into(),
        RUN.into(),
        package.map_or_else(OsString::new, |p| p.as_os_str().to_owned()),
        script.as_os_str().to_owned(),
    ]
}
