//! The font every PNG plot is drawn with, compiled into the binary.
//!
//! Why: plotters' system-font backend (`ttf`) links fontconfig and freetype,
//! so a binary built with it would not even start on a host without them
//! (the GPU machines have neither), which breaks "one binary, nothing to
//! install". With plotters' `ab_glyph` backend the text is rendered from
//! these bytes instead (DejaVu Sans, Bitstream Vera license, see
//! `assets/fonts/LICENSE`; ~0.75 MB of the binary).
use std::sync::Once;

use plotters::style::{register_font, FontStyle};

/// Family name plots ask for; [`register`] maps it to the embedded font.
pub const FAMILY: &str = "sans-serif";

static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded font under [`FAMILY`] (once per process; later
/// calls do nothing). Call before drawing text.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_err() {
            // Only if the embedded bytes were not a font: plots then fall
            // back to drawing without text.
            tracing::warn!("the embedded plot font did not parse; plots will have no text");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::style::IntoFont;

    #[test]
    fn text_can_be_measured_after_register() {
        register();
        let (w, h) = (FAMILY, 18)
            .into_font()
            .box_size("mean return")
            .expect("the embedded font renders text");
        assert!(w > 50 && h > 5, "box {w}x{h}");
    }
}
