//! A window onto a long list: which rows a screen of `height` lines shows and which one is
//! selected. Only the selection's position and the first shown row are kept, so moving,
//! paging and redrawing cost the same for ten rows and for 100,000.

/// The selected row and the first row shown of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListWindow {
    selected: usize,
    offset: usize,
}

impl ListWindow {
    /// The selected row's index (clamped to `len` by [`ListWindow::fit`]).
    pub fn selected(&self) -> usize {
        self.selected
    }

    /// The first row shown.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Moves the selection by `delta` rows within `0..len`.
    pub fn step(&mut self, delta: isize, len: usize) {
        let last = len.saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(delta).min(last);
    }

    /// Selects row `index` (clamped).
    pub fn select(&mut self, index: usize, len: usize) {
        self.selected = index.min(len.saturating_sub(1));
    }

    /// Selects the last row.
    pub fn end(&mut self, len: usize) {
        self.selected = len.saturating_sub(1);
    }

    /// Clamps the selection to `len` rows and scrolls so that it is among the `height` rows
    /// shown; returns the range of rows to draw.
    pub fn fit(&mut self, len: usize, height: usize) -> std::ops::Range<usize> {
        self.selected = self.selected.min(len.saturating_sub(1));
        let height = height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
        self.offset = self.offset.min(len.saturating_sub(height));
        self.offset..(self.offset + height).min(len)
    }
}
