//! The line-echo protocol (`--protocol echo`): every line received goes back unchanged.
//!
//! Sans-IO like the HTTP layer: [`echo_lines`] moves complete lines from the input buffer to
//! the output buffer, so every architecture frames echo the same way.

/// Longest line accepted; a longer one closes the connection.
pub const MAX_LINE: usize = 64 * 1024;

/// Moves every complete line (with its `\n`) from `input` to `out`. Returns how many lines
/// moved, or `Err(())` when the pending partial line is over [`MAX_LINE`].
#[allow(clippy::result_unit_err)]
pub fn echo_lines(input: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<u64, ()> {
    let Some(last_newline) = input.iter().rposition(|&b| b == b'\n') else {
        return if input.len() > MAX_LINE {
            Err(())
        } else {
            Ok(0)
        };
    };
    let lines = input[..=last_newline]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64;
    out.extend_from_slice(&input[..=last_newline]);
    input.drain(..=last_newline);
    if input.len() > MAX_LINE {
        return Err(());
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_complete_lines_and_keeps_the_rest() {
        let mut input = b"one\ntwo\nthr".to_vec();
        let mut out = Vec::new();
        assert_eq!(echo_lines(&mut input, &mut out), Ok(2));
        assert_eq!(out, b"one\ntwo\n");
        assert_eq!(input, b"thr");
        let mut long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(echo_lines(&mut long, &mut out), Err(()));
    }
}
