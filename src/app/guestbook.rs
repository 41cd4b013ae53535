//! The guestbook page: the shipped template with the visitor count and one page of remarks
//! (the newest [`PAGE_SIZE`] first, older ones by `?page=`), HTML-escaped, filled in; and the
//! form a POST carries, with its size caps. The caps and the page size bound the page: at
//! most 20 remarks of 2 KiB and names of 100 bytes, 6 times that after escaping (`&quot;`).

use crate::render::html::escape;
use crate::store::{GuestbookPage, Remark, PAGE_SIZE};

/// Longest remark accepted, in bytes after decoding and trimming (longer: 413).
pub const MAX_REMARK_BYTES: usize = 2048;
/// Longest name accepted, in bytes after decoding and trimming (longer: 413).
pub const MAX_NAME_BYTES: usize = 100;
/// Highest `?page=` accepted.
pub const MAX_PAGE: u64 = 1_000_000;

const TEMPLATE: &str = include_str!("../../templates/guestbook.html");

/// Renders the page.
pub fn render(page: &GuestbookPage) -> String {
    let mut items = String::new();
    for r in &page.remarks {
        items.push_str(&format!(
            "      <li><strong>{}</strong>: {}</li>\n",
            escape(&r.name),
            escape(&r.remarks)
        ));
    }
    if page.remarks.is_empty() {
        if page.total == 0 {
            items.push_str("      <li class=\"empty\">No remarks yet. Be the first.</li>\n");
        } else {
            items.push_str("      <li class=\"empty\">No remarks on this page.</li>\n");
        }
    }
    let pages = page.total.div_ceil(PAGE_SIZE).max(1);
    let mut nav = format!("page {} of {pages}", page.page);
    if page.page > 1 {
        nav.push_str(&format!(
            " <a rel=\"prev\" href=\"/guestbook?page={}\">newer</a>",
            (page.page - 1).min(pages)
        ));
    }
    if page.page < pages {
        nav.push_str(&format!(
            " <a rel=\"next\" href=\"/guestbook?page={}\">older</a>",
            page.page + 1
        ));
    }
    TEMPLATE
        .replace("{{visitors}}", &page.visitors.to_string())
        .replace("{{pages}}", &nav)
        .replace("{{remarks}}", &items)
}

/// Reads `guest-name` and `guest-remarks` from a form body; the status and reason to answer
/// when either is missing or blank (400) or over its cap (413).
pub fn parse_remark(body: &[u8]) -> Result<Remark, (u16, String)> {
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
            if name.len() > MAX_NAME_BYTES {
                Err((413, format!("guest-name is over {MAX_NAME_BYTES} bytes\n")))
            } else if remarks.len() > MAX_REMARK_BYTES {
                Err((
                    413,
                    format!("guest-remarks is over {MAX_REMARK_BYTES} bytes\n"),
                ))
            } else {
                Ok(Remark { name, remarks })
            }
        }
        _ => Err((
            400,
            "guest-name and guest-remarks must both be filled in\n".to_string(),
        )),
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
            page: 2,
            total: 41,
        };
        let html = render(&page);
        assert!(html.contains("&lt;b&gt;eve&lt;/b&gt;"));
        assert!(html.contains("a &amp; &quot;b&quot;"));
        assert!(html.contains(">7<"));
        assert!(html.contains("<form"));
        assert!(!html.contains("<b>eve"));
        assert!(html.contains("page 2 of 3"));
        assert!(html.contains("href=\"/guestbook?page=1\">newer"));
        assert!(html.contains("href=\"/guestbook?page=3\">older"));
    }

    #[test]
    fn parses_the_form_and_refuses_blanks() {
        let r = parse_remark(b"guest-name=Ann+B&guest-remarks=hi%21").unwrap();
        assert_eq!((r.name.as_str(), r.remarks.as_str()), ("Ann B", "hi!"));
        assert_eq!(
            parse_remark(b"guest-name=&guest-remarks=x").unwrap_err().0,
            400
        );
        assert_eq!(parse_remark(b"guest-name=a").unwrap_err().0, 400);
        let form = |name: usize, remark: usize| {
            format!(
                "guest-name={}&guest-remarks={}",
                "n".repeat(name),
                "r".repeat(remark)
            )
        };
        assert!(parse_remark(form(MAX_NAME_BYTES, MAX_REMARK_BYTES).as_bytes()).is_ok());
        assert_eq!(
            parse_remark(form(MAX_NAME_BYTES + 1, 1).as_bytes())
                .unwrap_err()
                .0,
            413
        );
        assert_eq!(
            parse_remark(form(1, MAX_REMARK_BYTES + 1).as_bytes())
                .unwrap_err()
                .0,
            413
        );
    }
}
