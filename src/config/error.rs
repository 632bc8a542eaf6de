//! The error of reading a configuration: which file, which field, and why.

/// A configuration error: which file, which field, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// File path.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax or type error (toml names the key and position).
    #[error("{file}: {message}")]
    Parse {
        /// File path.
        file: String,
        /// toml's message.
        message: String,
    },
    /// A value that parses but is not acceptable.
    #[error("{file}: field `{field}`: {reason}")]
    Invalid {
        /// File path.
        file: String,
        /// Dotted field path, e.g. `priority.3.xon`.
        field: String,
        /// Why it was rejected.
        reason: String,
    },
}
