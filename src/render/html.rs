//! HTML for people: [`escape`] and the one page shell ([`page_start`], [`PAGE_END`]) with
//! the one stylesheet every report (`sweep`, `load --html`, `merge --html`) shares. Pages
//! are self-contained: no scripts, no external styles.

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A limit in a word, its evidence a click (and a hover) away: `<details>` for a table cell.
pub fn evidence_cell(word: &str, evidence: &str) -> String {
    if evidence.is_empty() {
        return escape(word);
    }
    format!(
        "<details title=\"{}\"><summary>{}</summary>{}</details>",
        escape(evidence),
        escape(word),
        escape(evidence)
    )
}

/// The stylesheet of every page.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}h1{margin-bottom:.2em}h2{border-bottom:1px solid #ccc;\
padding-bottom:.2em;margin-top:2em}table{border-collapse:collapse;font-size:.9em;margin:.5em 0}\
th,td{border:1px solid #ddd;padding:.25em .6em;white-space:nowrap}th{background:#f3f3f3}td.num{text-align:right;\
font-variant-numeric:tabular-nums}td.failed{color:#b00}.scroll{overflow-x:auto;max-width:100%}\
.note{font-size:.85em;color:#555;margin:.1em 0}.summary{background:#f5faf5;border-left:4px solid \
#393;padding:.6em 1em}.warn{color:#8a5a00}.sat{background:#fdd}figure{margin:1em 0}\
svg{max-width:100%;height:auto}code{background:#f3f3f3;padding:0 .2em}.verdict{font-weight:600}\
tr.won td{background:#f5faf5}td details{white-space:normal;max-width:40em}td summary{cursor:pointer}\
details.reasons{font-size:.9em;color:#444}details.reasons summary{cursor:pointer;color:#262}";

/// The start of a page titled `title` (escaped here), up to and including `<body>`.
pub fn page_start(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(title)
    )
}

/// The end of every page.
pub const PAGE_END: &str = "</body></html>\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_character_that_can_end_text_or_an_attribute() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn a_page_starts_with_its_escaped_title_and_the_stylesheet() {
        let start = page_start("a<b");
        assert!(start.starts_with("<!DOCTYPE html>"));
        assert!(start.contains("<title>a&lt;b</title>"));
        assert!(start.contains(STYLE));
    }
}
