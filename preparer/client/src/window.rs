//! A page of a listing. Every listing of the Data API takes one, and the store pages with the
//! same value.

/// Default page size of a listing.
pub const DEFAULT_PAGE: u32 = 100;
/// Largest page size of a listing.
pub const MAX_PAGE: u32 = 1000;

/// A page request: rows whose id sorts after `after_id`, skipping `offset` matches, at most
/// `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// Matches to skip.
    pub offset: u32,
    /// Page size (clamped to 1..=[`MAX_PAGE`]; 0 means [`DEFAULT_PAGE`]).
    pub limit: u32,
    /// Keyset: only ids after this one (empty: from the first).
    pub after_id: String,
}

impl Window {
    /// The largest page, after `after_id`: what a caller reading every page asks for.
    pub fn largest_after(after_id: impl Into<String>) -> Self {
        Window {
            offset: 0,
            limit: MAX_PAGE,
            after_id: after_id.into(),
        }
    }

    /// The effective page size.
    pub fn page_size(&self) -> usize {
        match self.limit {
            0 => DEFAULT_PAGE as usize,
            n => n.min(MAX_PAGE) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_size_is_clamped_and_zero_means_the_default() {
        let size = |limit| {
            Window {
                limit,
                ..Window::default()
            }
            .page_size()
        };
        assert_eq!(size(0), DEFAULT_PAGE as usize);
        assert_eq!(size(7), 7);
        assert_eq!(size(MAX_PAGE + 1), MAX_PAGE as usize);
    }
}
