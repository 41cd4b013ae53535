//! The guestbook page: the shipped template with the visitor count and every remark,
//! HTML-escaped, filled in; and the form a POST carries.

use crate::store::{GuestbookPage, Remark};

const TEMPLATE: &str = include_str!("../../templates/guestbook.html");

/// Escapes text for HTML element content and attribute values.
pub fn html_escape(text: &str) -> String {
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

/// Renders the page.
pub fn render(page: &GuestbookPage) -> String {
    let mut items = String::new();
    for r in &page.remarks {
        items.push_str(&format!(
            "      <li><strong>{}</strong>: {}</li>\n",
            html_escape(&r.name),
            html_escape(&r.remarks)
        ));
    }
    if page.remarks.is_empty() {
        items.push_str("      <li class=\"empty\">No remarks yet. Be the first.</li>\n");
    }
    TEMPLATE
        .replace("{{visitors}}", &page.visitors.to_string())
        .replace("{{remarks}}", &items)
}

/// Reads `guest-name` and `guest-remarks` from a form body; `None` when either is missing
/// or blank.
pub fn parse_remark(body: &[u8]) -> Option<Remark> {
    let mut name = None;
    let mut remarks = None;
    for (k, v) in form_urlencoded::parse(body) {
        match k.as_ref() {
            "guest-name" => name = Some(v.trim().to_string()),
            "guest-remarks" => remarks = Some(v.trim().to_string()),
            _ => {}
        }
    }
    match (name, remarks) {
        (Some(name), Some(remarks)) if !name.is_empty() && !remarks.is_empty() => {
            Some(Remark { name, remarks })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_escaped_remarks_and_the_count() {
        let page = GuestbookPage {
            visitors: 7,
            remarks: vec![Remark {
                name: "<b>eve</b>".into(),
                remarks: "a & \"b\"".into(),
            }],
        };
        let html = render(&page);
        assert!(html.contains("&lt;b&gt;eve&lt;/b&gt;"));
        assert!(html.contains("a &amp; &quot;b&quot;"));
        assert!(html.contains(">7<"));
        assert!(html.contains("<form"));
        assert!(!html.contains("<b>eve"));
    }

    #[test]
    fn parses_the_form_and_refuses_blanks() {
        let r = parse_remark(b"guest-name=Ann+B&guest-remarks=hi%21").unwrap();
        assert_eq!((r.name.as_str(), r.remarks.as_str()), ("Ann B", "hi!"));
        assert_eq!(parse_remark(b"guest-name=&guest-remarks=x"), None);
        assert_eq!(parse_remark(b"guest-name=a"), None);
    }
}
