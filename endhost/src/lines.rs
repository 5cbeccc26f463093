//! JSON lines on a socket (the controller's connections, the launched transport's
//! Unix socket), read with a bound: a peer can make us hold at most [`MAX_LINE`]
//! bytes, whatever it sends.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line either side accepts; a launch for thousands of workers fits.
pub const MAX_LINE: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("a line longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("a line that is not UTF-8")]
    NotUtf8,
}

/// The next line without its newline; `None` at the end of the stream (a last line
/// without a newline is still returned).
pub async fn next_line(
    reader: &mut (impl AsyncBufRead + Unpin),
) -> Result<Option<String>, LineError> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            break;
        }
        let (taken, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end, true),
            None => (available.len(), false),
        };
        if line.len() + taken > MAX_LINE {
            return Err(LineError::TooLong);
        }
        line.extend_from_slice(&available[..taken]);
        reader.consume(taken + usize::from(done));
        if done {
            break;
        }
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| LineError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_utf8() {
        let mut input: &[u8] = b"one\ntwo";
        assert_eq!(next_line(&mut input).await.unwrap().as_deref(), Some("one"));
        assert_eq!(next_line(&mut input).await.unwrap().as_deref(), Some("two"));
        assert!(next_line(&mut input).await.unwrap().is_none());
        let mut bad: &[u8] = b"\xff\xfe\n";
        assert!(matches!(next_line(&mut bad).await, Err(LineError::NotUtf8)));
        let long = vec![b'x'; MAX_LINE + 1];
        assert!(matches!(
            next_line(&mut long.as_slice()).await,
            Err(LineError::TooLong)
        ));
    }
}
