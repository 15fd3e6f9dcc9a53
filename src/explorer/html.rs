//! [`Html`]: a page being written. Markup goes in only as `&'static str` (written in this
//! crate); every other string, whatever its source, goes through [`escape_into`], the one
//! escaping function, which makes it text in element content and in double-quoted attributes.

use std::fmt::Write;

/// A page being written; see the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct Html(String);

/// Writes `s` into `out` as HTML text: `&`, `<`, `>`, `"` and `'` become character references,
/// so that nothing in `s` can open an element, end an attribute value or start a reference.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    let mut rest = s;
    while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// `s` escaped as [`escape_into`] does.
#[cfg(test)]
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// Escapes what a `Display` writes, as it is written.
struct Escaping<'a>(&'a mut String);

impl Write for Escaping<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        escape_into(self.0, s);
        Ok(())
    }
}

impl Html {
    /// An empty page with room for `bytes`.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Self(String::with_capacity(bytes))
    }

    /// Markup written in this crate.
    pub(crate) fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Any string, escaped.
    pub(crate) fn text(&mut self, s: &str) -> &mut Self {
        escape_into(&mut self.0, s);
        self
    }

    /// Anything displayable, escaped.
    pub(crate) fn show(&mut self, v: impl std::fmt::Display) -> &mut Self {
        let _ = write!(Escaping(&mut self.0), "{v}");
        self
    }

    /// A number (nothing to escape).
    pub(crate) fn num(&mut self, n: impl itoa::Integer) -> &mut Self {
        self.0.push_str(itoa::Buffer::new().format(n));
        self
    }

    /// Another page's markup, already written through these methods.
    pub(crate) fn append(&mut self, other: Self) -> &mut Self {
        self.0.push_str(&other.0);
        self
    }

    /// The markup written so far.
    pub(crate) fn into_string(self) -> String {
        self.0
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_escaped() {
        assert_eq!(
            escape(r#"<img src=x onerror="alert('1')">&amp;"#),
            "&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;amp;"
        );
        assert_eq!(escape("plain ✓ text"), "plain ✓ text");
        let mut h = Html::default();
        h.raw("<p title=\"").text("\"><script>").raw("\">").show(format_args!("{}<", 1));
        assert_eq!(h.into_string(), "<p title=\"&quot;&gt;&lt;script&gt;\">1&lt;");
    }
}
